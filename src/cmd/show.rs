//! `cca show`: a session's conversation for a person (rendered on a terminal, through the
//! pager), read from the file in pieces so that memory does not grow with it.

use std::fs::File;
use std::io::{self, BufReader, IsTerminal, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;

use anyhow::{Context, Result};

use super::print_with;
use super::sessions::{estimate_tokens, local_time_with};
use crate::cli::ShowArgs;
use crate::config::Flags;
use crate::error::{Failure, exit};
use crate::front::terminal::{Mode, cost_line, rendering};
use crate::human::human_bytes;
use crate::render;
use crate::session::{self, settings};
use crate::store;
use crate::transcript::{
    self, Direction, Event, Header, Kind, MarkerEscaper, Meta, Summary, Totals,
};

/// `cca show`
pub(crate) fn run(args: &ShowArgs) -> Result<u8> {
    let (id, raw) = (args.session.id.as_deref(), args.raw);
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
        Ok(Some(Err(e))) if e.newer => return Err(store::not_transcript(&path, &id, e)),
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
                write_readable(&id, &file, size, summary, tokens, shown, out, &cannot_read)
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
#[allow(clippy::too_many_arguments)]
fn write_readable(
    id: &str,
    file: &File,
    size: u64,
    summary: &Summary,
    live_tokens: u64,
    shown: Shown,
    out: &mut dyn Write,
    cannot_read: &dyn Fn() -> String,
) -> Result<()> {
    let live = (summary.live.bytes(), live_tokens);
    let head = readable_head(id, &summary.header, live, size, &summary.totals);
    out.write_all(head.as_bytes())?;
    // Once writing fails (the reader quit), reading stops too.
    let stop = std::cell::Cell::new(false);
    let mut failed: Option<anyhow::Error> = None;
    let mut done = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let mut unescaped = Vec::with_capacity(70 * 1024);
    let records = Until { inner: ReadAt { file, at: 0, end: size }, stop: &stop };
    let reader = BufReader::with_capacity(256 * 1024, records);
    // A question waits (with what came with it) for its outcome: its title says whether it was
    // answered, so that a question asked again is not shown as a second turn of the same number.
    let mut waiting: Vec<Item> = Vec::new();
    let mut show = |item: &Item, answered: bool| -> Result<()> {
        match item {
            Item::Note(text) => {
                let mut line = vec![0u8; (text.end - text.start) as usize];
                file.read_exact_at(&mut line, text.start).with_context(cannot_read)?;
                let line = transcript::one_line(&String::from_utf8_lossy(&line), 2_000);
                out.write_all(format!("\n{line}\n").as_bytes())?;
                Ok(())
            }
            Item::Record(r) => {
                let (on, off) = if shown.bold { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
                let title = record_title(r.kind, &r.meta, &mut done, answered);
                // What the user typed and attached is shown as it is, markdown or not (but
                // cleaned).
                let style =
                    shown.style.filter(|_| matches!(r.kind, Kind::Assistant | Kind::Compaction));
                out.write_all(format!("\n{on}── {title} ──{off}\n").as_bytes())?;
                let content = Content { file, range: &r.content, style, clean: shown.clean };
                write_content(content, &mut buf, &mut unescaped, out, cannot_read)
            }
        }
    };
    let mut flush = |waiting: &mut Vec<Item>, answered: bool| -> Result<()> {
        waiting.drain(..).try_for_each(|item| show(&item, answered))
    };
    let scanned = transcript::Scanner::scan(reader, |event| {
        if stop.get() {
            return;
        }
        let item = match event {
            Event::Record(r) => Item::Record(Box::new(r)),
            Event::Note { text, .. } => Item::Note(text),
            Event::Header(..) | Event::Problem(_) | Event::PartlyRead(_) => return,
        };
        let kind = match &item {
            Item::Record(r) => Some(r.kind),
            Item::Note(_) => None,
        };
        let written = match kind {
            Some(Kind::User) => flush(&mut waiting, false).map(|()| waiting.push(item)),
            // An automatic compaction is written between a question and its answer.
            Some(Kind::Attachment | Kind::Compaction) | None if !waiting.is_empty() => {
                waiting.push(item);
                Ok(())
            }
            // An answer with no question before it: no exchange's (see `record_title`).
            Some(Kind::Assistant) if waiting.is_empty() => flush(&mut vec![item], false),
            Some(Kind::Assistant) => {
                flush(&mut waiting, true).and_then(|()| flush(&mut vec![item], true))
            }
            _ => flush(&mut waiting, false).and_then(|()| flush(&mut vec![item], false)),
        };
        if let Err(e) = written {
            failed = Some(e);
            stop.set(true);
        }
    });
    // A question at the end, without an outcome yet, may still be answered: numbered.
    if failed.is_none()
        && let Err(e) = flush(&mut waiting, true)
    {
        failed = Some(e);
    }
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

/// An RFC 3339 time as local `YYYY-MM-DD HH:MM`.
fn local_time(rfc3339: &str) -> String {
    let when =
        chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M").parse().expect("a valid format");
    local_time_with(rfc3339, &when)
}

/// What `cca show` prints above the records of session `id`. The id is the file's: a copy of
/// another's transcript (a fork `cca sync` made of another machine's continuation) keeps that
/// session's id in its header, and giving that one would continue the other branch.
fn readable_head(
    id: &str,
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
        "session {}{}{} · {}{} · prompt {} · started {}\n",
        field(id),
        if h.id == id { String::new() } else { format!(" (from {})", field(&h.id)) },
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

/// A record's title in `cca show`; `done` counts the answers so far, for turn numbers. A
/// question is `answered` when an answer follows it; an answer that is not `answered` has no
/// question before it: it belongs to no exchange and is never sent, as the live context reads
/// the file.
/// Marker fields are any text a file holds: each is flattened to one line (no control
/// character), as the header's are.
fn record_title(kind: Kind, meta: &Meta, done: &mut u64, answered: bool) -> String {
    let field = |text: &str| transcript::one_line(text, 200);
    let turn = *done + 1;
    match kind {
        Kind::User if answered => format!("{turn}. You"),
        Kind::User => "You (not answered)".to_string(),
        Kind::Attachment => {
            format!("attached: {}", field(meta.name.as_deref().unwrap_or("context")))
        }
        Kind::Assistant if !answered => {
            "an answer with no question before it: not an exchange, never sent".to_string()
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
        // Written where it was made, after the turns it kept verbatim: the title says so.
        Kind::Compaction => format!(
            "summary of {}, made after turn {}, sent in their place ({} → {})",
            crate::human::turns(meta.first.unwrap_or(1), meta.through.unwrap_or(0)),
            *done,
            human_bytes(meta.bytes_before.unwrap_or(0)),
            human_bytes(meta.bytes_after.unwrap_or(0))
        ),
    }
}

/// What `cca show` draws in the file's order: a record, or a note between records.
enum Item {
    Record(Box<transcript::RecordSpan>),
    Note(Range<u64>),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Record;
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
        let mut out =
            readable_head(&t.header.id, &t.header, live, text.len() as u64, &summary.totals);
        let (mut done, mut asked) = (0, false);
        for (i, r) in t.records.iter().enumerate() {
            // A question is answered unless what follows it (past its attachments and a
            // compaction) is not an answer; one at the end may still be. An answer is one
            // when a question waits for it.
            let outcome = t.records[i + 1..]
                .iter()
                .find(|next| !matches!(next.kind, Kind::Attachment | Kind::Compaction));
            let answered = match r.kind {
                Kind::Assistant => asked,
                _ => outcome.is_none_or(|next| next.kind == Kind::Assistant),
            };
            asked = match r.kind {
                Kind::User => true,
                Kind::Attachment | Kind::Compaction => asked,
                _ => false,
            };
            let title = record_title(r.kind, &r.meta, &mut done, answered);
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
        let id = summary.header.id.clone();
        write_readable(&id, &file, size, &summary, tokens, shown, &mut out, &|| {
            "cannot read".into()
        })
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

    /// Titles as the live context counts exchanges: a question with an automatic compaction
    /// written before its answer is answered; an answer with no question is no exchange.
    #[test]
    fn a_compaction_before_an_answer_or_an_answer_alone_keeps_the_numbers() {
        let record = |kind, content: &str| Record {
            kind,
            meta: Meta { through: Some(1), ..Meta::default() },
            content: content.into(),
        };
        let records = vec![
            record(Kind::User, "q1"),
            record(Kind::Assistant, "a1"),
            record(Kind::Assistant, "stray"),
            record(Kind::User, "q2"),
            record(Kind::Compaction, "summary"),
            record(Kind::Assistant, "a2"),
        ];
        let text = transcript::render(&Transcript { header: header(), records });
        let shown = streamed(&text, false).unwrap();
        assert_eq!(Some(&shown), shown_from_memory(&text, false).as_ref());
        let titles: Vec<&str> = shown.lines().filter(|l| l.starts_with("── ")).collect();
        assert_eq!(titles.len(), 6, "{shown}");
        assert!(titles[2].contains("no question before it"), "{shown}");
        assert_eq!(titles[3], "── 2. You ──", "{shown}");
        assert!(titles[5].starts_with("── 2. "), "{shown}");
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
