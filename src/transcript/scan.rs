//! Reading transcripts: the [`Scanner`] streams a file line by line into [`Event`]s (the header,
//! each record by where it sits, and the problems reading worked around), keeping only marker
//! lines whole, so memory stays flat whatever the file's size.

use std::io::{self, BufRead};
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::{BOM, HEAD_MAX, Header, Kind, MARKER, Meta};

/// A record found by [`Scanner`]: where it sits in the file, and where its content (in stored,
/// escaped form) sits. Content is read from the file only when it is needed.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordSpan {
    pub kind: Kind,
    pub meta: Meta,
    /// The whole record, from its marker to the end of its end marker line.
    pub raw: Range<u64>,
    /// The content, still escaped; see [`unescape`](super::unescape).
    pub content: Range<u64>,
    /// 1-based line number of the record's marker.
    pub line: u64,
    /// 1-based line number of its end marker.
    pub end_line: u64,
}

/// Something wrong in a transcript that reading worked around.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub line: u64,
    pub message: String,
    /// For a record cut off at the end of the file (cca was stopped while writing it): the
    /// offset where it starts, so that it can be taken out whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_off_at: Option<u64>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The header, and the offset just past it.
    Header(Header, u64),
    Record(RecordSpan),
    Problem(Problem),
    /// A problem that leaves the conversation as it is: a record kept whole though some of its
    /// data (when, which engine, tokens) could not be read.
    PartlyRead(Problem),
    /// A line of text between records that is not blank: a note added by hand, or the one cca
    /// leaves where it took out a record cut off by a crash. Not part of any record; its
    /// 1-based line number and where its text sits (without the line's end).
    Note {
        line: u64,
        text: Range<u64>,
    },
}

/// The file is not a transcript cca can read at all.
#[derive(Debug)]
pub struct NotTranscript {
    pub line: u64,
    pub message: String,
    /// The line is not UTF-8 text (a file saved in another encoding): converting it is the fix.
    pub not_utf8: bool,
    /// The header names a format this cca does not write (a newer cca's): updating is the fix.
    pub newer: bool,
}

impl NotTranscript {
    fn new(line: u64, message: impl Into<String>) -> NotTranscript {
        NotTranscript { line, message: message.into(), not_utf8: false, newer: false }
    }
}

impl std::fmt::Display for NotTranscript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for NotTranscript {}

/// A place in a transcript where reading can start again: just past a newline, between records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// Bytes before it.
    pub offset: u64,
    /// Lines before it.
    pub line: u64,
}

/// How a scan ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanEnd {
    /// Just past the last byte read.
    pub offset: u64,
    /// Where reading can go on over bytes appended later: set when the text ends with a
    /// newline, between records (not inside a record, nor in the middle of a line).
    pub resume: Option<Position>,
}

/// One line as the scanner sees it: its place, and its first bytes (enough for any marker).
pub(super) struct Line<'a> {
    pub(super) start: u64,
    /// Offset just past the line's text, before its newline.
    pub(super) end: u64,
    pub(super) head: &'a [u8],
    /// True when `head` holds the whole line.
    pub(super) whole: bool,
    /// The line ends in `\r` (before its newline): a file saved with CRLF line endings.
    pub(super) cr: bool,
    /// The whole line is UTF-8.
    pub(super) utf8: bool,
    /// A newline ends the line (the last line of a file cut short has none).
    pub(super) ended: bool,
}

/// A line split across two refills of the reader's buffer.
struct Split {
    start: u64,
    head: Vec<u8>,
    whole: bool,
    last: Option<u8>,
    utf8: Utf8Check,
}

/// Checks that bytes arriving in pieces are UTF-8 (a character may be cut between pieces).
#[derive(Default)]
struct Utf8Check {
    carry: Vec<u8>,
    bad: bool,
}

impl Utf8Check {
    fn push(&mut self, mut bytes: &[u8]) {
        if self.bad {
            return;
        }
        while !self.carry.is_empty() {
            let Some((&b, rest)) = bytes.split_first() else { return };
            self.carry.push(b);
            bytes = rest;
            match std::str::from_utf8(&self.carry) {
                Ok(_) => self.carry.clear(),
                Err(e) if e.error_len().is_some() => {
                    self.bad = true;
                    return;
                }
                Err(_) => {}
            }
        }
        if let Err(e) = std::str::from_utf8(bytes) {
            match e.error_len() {
                Some(_) => self.bad = true,
                None => self.carry = bytes[e.valid_up_to()..].to_vec(),
            }
        }
    }

    fn ok(&self) -> bool {
        !self.bad && self.carry.is_empty()
    }
}

/// Streams a transcript, line by line, into [`Event`]s. Memory stays flat whatever the size of
/// the file: only marker lines are kept whole.
pub struct Scanner {
    state: State,
    pub(super) line_no: u64,
}

enum State {
    BeforeHeader,
    InHeader { header: Header, line: u64 },
    Between,
    InRecord(Open),
}

struct Open {
    kind: Kind,
    meta: Meta,
    start: u64,
    line: u64,
    phase: Phase,
    /// The marker line ends in `\r`: the file was saved with CRLF line endings (cca writes
    /// `\n`), so the `\r` before each newline cca wrote is part of the structure, not content.
    crlf: bool,
    /// First, last and next-to-last content line.
    first: Option<BodyLine>,
    last: Option<BodyLine>,
    before_last: Option<BodyLine>,
}

/// A content line as [`Open`] keeps it.
#[derive(Clone, Copy)]
struct BodyLine {
    start: u64,
    end: u64,
    /// The length of the backtick fence the line is, if it is one.
    fence: Option<usize>,
    cr: bool,
}

enum Phase {
    Heading,
    Blank,
    Body,
}

enum Marker {
    /// The header, with the fields left out because they could not be read, if any were.
    Session(Header, Option<String>),
    /// A record's start, with why some of its data was left out, if it was.
    Open(Kind, Meta, Option<String>),
    End {
        fence: bool,
    },
    Bad(String),
}

impl Default for Scanner {
    fn default() -> Self {
        Self::new()
    }
}

impl Scanner {
    pub fn new() -> Self {
        Scanner { state: State::BeforeHeader, line_no: 0 }
    }

    /// Reads a whole transcript, calling `on_event` for each event, in file order.
    pub fn scan(
        reader: impl BufRead,
        on_event: impl FnMut(Event),
    ) -> io::Result<Result<(), NotTranscript>> {
        Ok(Self::scan_from(reader, None, on_event)?.map(|_| ()))
    }

    /// Reads a transcript from its start, or (`from`) from a position between records with the
    /// reader already there, calling `on_event` for each event, in file order. Offsets and line
    /// numbers in the events are those of the whole file either way.
    pub fn scan_from(
        mut reader: impl BufRead,
        from: Option<Position>,
        mut on_event: impl FnMut(Event),
    ) -> io::Result<Result<ScanEnd, NotTranscript>> {
        let (mut scanner, mut offset) = match from {
            None => (Scanner::new(), 0),
            Some(at) => (Scanner { state: State::Between, line_no: at.line }, at.offset),
        };
        // Lines are handed over straight from the reader's buffer; only a line split across two
        // refills is copied, and of it only the first HEAD_MAX bytes.
        let mut split: Option<Split> = None;
        loop {
            let buf = match reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                break;
            }
            let mut pos = 0;
            while let Some(p) = memchr::memchr(b'\n', &buf[pos..]) {
                let end = pos + p;
                let result = match split.take() {
                    Some(mut split) => {
                        let text = &buf[pos..end];
                        let whole = split.whole && split.head.len() + p <= HEAD_MAX;
                        let room = HEAD_MAX.saturating_sub(split.head.len());
                        split.head.extend_from_slice(&text[..p.min(room)]);
                        split.utf8.push(text);
                        let line = Line {
                            start: split.start,
                            end: offset + end as u64,
                            head: &split.head,
                            whole,
                            cr: text.last().copied().or(split.last) == Some(b'\r'),
                            utf8: split.utf8.ok(),
                            ended: true,
                        };
                        scanner.line(&line, &mut on_event)
                    }
                    None => {
                        let text = &buf[pos..end];
                        let line = Line {
                            start: offset + pos as u64,
                            end: offset + end as u64,
                            head: &text[..text.len().min(HEAD_MAX)],
                            whole: text.len() <= HEAD_MAX,
                            cr: text.last() == Some(&b'\r'),
                            utf8: std::str::from_utf8(text).is_ok(),
                            ended: true,
                        };
                        scanner.line(&line, &mut on_event)
                    }
                };
                if let Err(e) = result {
                    return Ok(Err(e));
                }
                pos = end + 1;
            }
            if pos < buf.len() {
                let split = split.get_or_insert_with(|| Split {
                    start: offset + pos as u64,
                    head: Vec::new(),
                    whole: true,
                    last: None,
                    utf8: Utf8Check::default(),
                });
                let rest = &buf[pos..];
                let room = HEAD_MAX.saturating_sub(split.head.len());
                split.whole = split.whole && rest.len() <= room;
                split.head.extend_from_slice(&rest[..rest.len().min(room)]);
                split.last = rest.last().copied();
                split.utf8.push(rest);
            }
            let n = buf.len();
            reader.consume(n);
            offset += n as u64;
        }
        let mut ends_with_newline = true;
        if let Some(split) = split.take() {
            // The last line has no newline.
            ends_with_newline = false;
            let line = Line {
                start: split.start,
                end: offset,
                head: &split.head,
                whole: split.whole,
                cr: split.last == Some(b'\r'),
                utf8: split.utf8.ok(),
                ended: false,
            };
            if let Err(e) = scanner.line(&line, &mut on_event) {
                return Ok(Err(e));
            }
        }
        let resume = (ends_with_newline && matches!(scanner.state, State::Between))
            .then_some(Position { offset, line: scanner.line_no });
        Ok(scanner.finish(&mut on_event).map(|()| ScanEnd { offset, resume }))
    }

    pub(super) fn line(
        &mut self,
        line: &Line,
        on_event: &mut impl FnMut(Event),
    ) -> Result<(), NotTranscript> {
        self.line_no += 1;
        let no = self.line_no;
        if !line.utf8 {
            return Err(NotTranscript {
                line: no,
                message: "this line is not UTF-8 text (was the file saved in another encoding?)"
                    .into(),
                not_utf8: true,
                newer: false,
            });
        }
        // A byte-order mark, which some editors put at the start of a UTF-8 file, is not part
        // of the header line.
        if no == 1 && line.head.starts_with(BOM) {
            let line = Line { start: line.start + 3, head: &line.head[3..], ..*line };
            return self.marker_or_content(&line, no, on_event);
        }
        self.marker_or_content(line, no, on_event)
    }

    fn marker_or_content(
        &mut self,
        line: &Line,
        no: u64,
        on_event: &mut impl FnMut(Event),
    ) -> Result<(), NotTranscript> {
        // Most lines are content: handled in place, without moving the state around.
        if !line.head.starts_with(MARKER) {
            match &mut self.state {
                State::InRecord(open) => {
                    open.body_line(line);
                    return Ok(());
                }
                State::Between => {
                    // The start of a line a crash cut short is not a note.
                    if line.ended && !line.head.iter().all(u8::is_ascii_whitespace) {
                        let end = line.end - u64::from(line.cr);
                        on_event(Event::Note { line: no, text: line.start..end });
                    }
                    return Ok(());
                }
                State::InHeader { .. } => return Ok(()),
                State::BeforeHeader => {}
            }
        }
        let marker = if line.head.starts_with(MARKER) { Some(parse_marker(line)) } else { None };
        let state = std::mem::replace(&mut self.state, State::Between);
        self.state = match state {
            State::BeforeHeader => match marker {
                // Another format is read as it says, or not at all: never appended to as this
                // one.
                Some(Marker::Session(header, _)) if header.format != super::FORMAT => {
                    return Err(NotTranscript {
                        newer: header.format > super::FORMAT,
                        ..NotTranscript::new(
                            no,
                            format!(
                                "the header says format {}; this cca reads format {}",
                                header.format,
                                super::FORMAT
                            ),
                        )
                    });
                }
                Some(Marker::Session(header, left_out)) => {
                    if let Some(why) = left_out {
                        on_event(Event::PartlyRead(Problem {
                            line: no,
                            message: format!(
                                "the session header's data cannot all be read; {why} left out"
                            ),
                            cut_off_at: None,
                        }));
                    }
                    State::InHeader { header, line: no }
                }
                Some(Marker::Bad(why)) => {
                    return Err(NotTranscript::new(no, format!("bad header: {why}")));
                }
                _ => {
                    return Err(NotTranscript::new(
                        no,
                        "expected the session header `<!-- cca:session {...} -->`",
                    ));
                }
            },
            State::InHeader { header, line: header_line } => match marker {
                Some(Marker::End { .. }) => {
                    on_event(Event::Header(header, line.end + 1));
                    State::Between
                }
                Some(_) => {
                    return Err(NotTranscript::new(
                        header_line,
                        "the session header has no end marker",
                    ));
                }
                None => State::InHeader { header, line: header_line },
            },
            State::Between => self.start_or_skip(marker, line, on_event),
            State::InRecord(mut open) => match marker {
                Some(Marker::End { fence }) => {
                    on_event(Event::Record(open.close(line, no, fence)));
                    State::Between
                }
                Some(other) => {
                    on_event(Event::Problem(Problem {
                        line: open.line,
                        message: format!(
                            "the {} record has no end marker (cut off?); it is ignored",
                            open.kind.word()
                        ),
                        cut_off_at: None,
                    }));
                    // A broken marker right after is part of the same damage: one report is enough.
                    match other {
                        Marker::Bad(_) => State::Between,
                        other => self.start_or_skip(Some(other), line, on_event),
                    }
                }
                None => {
                    open.body_line(line);
                    State::InRecord(open)
                }
            },
        };
        Ok(())
    }

    fn start_or_skip(
        &mut self,
        marker: Option<Marker>,
        line: &Line,
        on_event: &mut impl FnMut(Event),
    ) -> State {
        match marker {
            Some(Marker::Open(kind, meta, left_out)) => {
                if let Some(why) = left_out {
                    on_event(Event::PartlyRead(Problem {
                        line: self.line_no,
                        message: format!(
                            "the {} record's data cannot all be read ({why}); the record is kept without what cannot be read",
                            kind.word()
                        ),
                        cut_off_at: None,
                    }));
                }
                State::InRecord(Open {
                    kind,
                    meta,
                    start: line.start,
                    line: self.line_no,
                    phase: Phase::Heading,
                    crlf: line.cr,
                    first: None,
                    last: None,
                    before_last: None,
                })
            }
            Some(Marker::Bad(why)) => {
                on_event(Event::Problem(Problem {
                    line: self.line_no,
                    message: format!("unreadable marker ({why}); the record is ignored"),
                    cut_off_at: None,
                }));
                State::Between
            }
            Some(Marker::Session(..)) => {
                on_event(Event::Problem(Problem {
                    line: self.line_no,
                    message: "a second session header; it is ignored".into(),
                    cut_off_at: None,
                }));
                State::Between
            }
            // Text between records (a note added by hand) and stray end markers are not records.
            Some(Marker::End { .. }) | None => State::Between,
        }
    }

    pub(super) fn finish(self, on_event: &mut impl FnMut(Event)) -> Result<(), NotTranscript> {
        match self.state {
            State::BeforeHeader => Err(NotTranscript::new(1, "the file is empty")),
            State::InHeader { line, .. } => {
                Err(NotTranscript::new(line, "the session header has no end marker"))
            }
            State::Between => Ok(()),
            State::InRecord(open) => {
                on_event(Event::Problem(Problem {
                    line: open.line,
                    message: format!(
                        "the last record ({}) was cut off before its end marker; it is ignored",
                        open.kind.word()
                    ),
                    cut_off_at: Some(open.start),
                }));
                Ok(())
            }
        }
    }
}

impl Scanner {
    /// Between records: every record seen so far is complete (or reported cut off).
    pub(super) fn settled(&self) -> bool {
        matches!(self.state, State::Between)
    }

    /// Whether the next line can change the state in a way a later line does not repeat: the
    /// header's first line, and a record's marker, heading, blank line and first content line.
    /// Past those, a content line only matters as the record's last one.
    pub(super) fn needs_every_line(&self) -> bool {
        match &self.state {
            State::BeforeHeader => true,
            State::InRecord(open) => !matches!(open.phase, Phase::Body) || open.first.is_none(),
            State::InHeader { .. } | State::Between => false,
        }
    }
}

/// Newlines in `bytes`. Summed in blocks small enough for a byte counter, which the compiler
/// turns into vector code: several times faster than counting one byte at a time.
pub fn count_newlines(bytes: &[u8]) -> u64 {
    let mut blocks = bytes.chunks_exact(240);
    let mut n: u64 = 0;
    for block in &mut blocks {
        n += u64::from(block.iter().map(|&b| u8::from(b == b'\n')).sum::<u8>());
    }
    n + blocks.remainder().iter().filter(|&&b| b == b'\n').count() as u64
}

impl Open {
    fn body_line(&mut self, line: &Line) {
        match self.phase {
            Phase::Heading if line.head.first() == Some(&b'#') => {
                self.phase = Phase::Blank;
                return;
            }
            Phase::Blank if line.start + u64::from(self.crlf && line.cr) == line.end => {
                self.phase = Phase::Body;
                return;
            }
            _ => self.phase = Phase::Body,
        }
        let text = match line.head.strip_suffix(b"\r") {
            Some(text) if self.crlf => text,
            _ => line.head,
        };
        let fence = if line.whole && text.len() >= 3 && text.iter().all(|&b| b == b'`') {
            Some(text.len())
        } else {
            None
        };
        let info = BodyLine { start: line.start, end: line.end, fence, cr: line.cr };
        if self.first.is_none() {
            self.first = Some(info);
        }
        self.before_last = self.last.replace(info);
    }

    fn close(self, end_line: &Line, end_line_no: u64, fence: bool) -> RecordSpan {
        let raw = self.start..end_line.end + 1;
        // In a file saved with CRLF endings, the newline cca wrote before a line is `\r\n`.
        let newline =
            |before: Option<BodyLine>| 1 + u64::from(self.crlf && before.is_some_and(|l| l.cr));
        let content = match (self.first, self.last) {
            (None, _) | (_, None) => end_line.start..end_line.start,
            (Some(first), Some(last)) => {
                let body_start = first.start;
                // Every content line ends in a newline; the last one is the writer's, not content.
                let mut range = body_start..(end_line.start - newline(Some(last))).max(body_start);
                if fence {
                    range.end =
                        last.start.saturating_sub(newline(self.before_last)).max(body_start);
                } else if self.kind == Kind::Attachment
                    && self.meta.media_type.is_none()
                    && first.fence.is_some()
                    && first.fence == last.fence
                    && first.start != last.start
                {
                    let from = first.end + 1;
                    range = from..last.start.saturating_sub(newline(self.before_last)).max(from);
                }
                range
            }
        };
        RecordSpan {
            kind: self.kind,
            meta: self.meta,
            raw,
            content,
            line: self.line,
            end_line: end_line_no,
        }
    }
}

fn parse_marker(line: &Line) -> Marker {
    if !line.whole {
        return Marker::Bad("the line is too long".into());
    }
    let Ok(text) = std::str::from_utf8(line.head) else {
        return Marker::Bad("not UTF-8".into());
    };
    // Spaces an editor (or a hand) left after the marker are not part of it.
    let text = text.strip_suffix('\r').unwrap_or(text).trim_end_matches([' ', '\t']);
    let Some(inner) = text.strip_prefix("<!-- cca:").and_then(|t| t.strip_suffix(" -->")) else {
        return Marker::Bad("no closing ` -->`".into());
    };
    let (word, json) = inner.split_once(' ').unwrap_or((inner, ""));
    match word {
        "end" => Marker::End { fence: json == "fence" },
        "session" => match serde_json::from_str::<Header>(json) {
            Ok(h) => Marker::Session(h, None),
            Err(e) => match readable_header(json) {
                Some((h, left_out)) => Marker::Session(h, Some(left_out)),
                None => Marker::Bad(format!("header data: {e}")),
            },
        },
        _ => {
            let Some(kind) = Kind::from_word(word) else {
                return Marker::Bad(format!("unknown record kind `{word}`"));
            };
            if json.is_empty() {
                return Marker::Open(kind, Meta::default(), None);
            }
            match serde_json::from_str(json) {
                Ok(meta) => Marker::Open(kind, meta, None),
                Err(e) => Marker::Open(kind, readable_meta(json), Some(e.to_string())),
            }
        }
    }
}

/// A header whose optional fields (model, name, where it was forked from or imported from)
/// cannot all be read: read without those that cannot, which are named. A header whose own
/// fields (its id, format, engine, ...) cannot be read is not one (`None`).
fn readable_header(json: &str) -> Option<(Header, String)> {
    use serde_json::{Value, from_value};
    let Ok(Value::Object(mut fields)) = serde_json::from_str(json) else { return None };
    let readable = |key: &str, value: &Value| match key {
        "model" | "name" => from_value::<Option<String>>(value.clone()).is_ok(),
        "forked_from" => from_value::<Option<super::ForkedFrom>>(value.clone()).is_ok(),
        "imported" => from_value::<Option<super::Imported>>(value.clone()).is_ok(),
        _ => true,
    };
    let left_out: Vec<String> =
        fields.iter().filter(|(k, v)| !readable(k, v)).map(|(k, _)| format!("`{k}`")).collect();
    if left_out.is_empty() {
        return None;
    }
    fields.retain(|k, v| readable(k, v));
    let header = from_value(Value::Object(fields)).ok()?;
    Some((header, left_out.join(", ")))
}

/// What can be read of a record's data that cannot be read whole (a figure of the wrong type,
/// a number out of range, a key twice, text cut off by hand): each field that reads on its
/// own, and nothing of the rest. A record is what someone said; its data (when, which
/// engine, tokens, cost) is a note beside it, and never worth the answer.
fn readable_meta(json: &str) -> Meta {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str(json) else {
        return Meta::default();
    };
    let readable: serde_json::Map<String, serde_json::Value> = fields
        .into_iter()
        .filter(|(key, value)| {
            let alone =
                serde_json::Value::Object([(key.clone(), value.clone())].into_iter().collect());
            serde_json::from_value::<Meta>(alone).is_ok()
        })
        .collect();
    serde_json::from_value(serde_json::Value::Object(readable)).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::io::BufRead;

    use proptest::prelude::*;

    use super::*;
    use crate::transcript::testing::{self, any_kind, hostile_text, record, round_trip};
    use crate::transcript::{Header, Kind, Meta, Record, Transcript, render, summarize};

    fn header() -> Header {
        testing::header("what changed?")
    }

    #[test]
    fn a_line_that_is_not_utf8_is_named() {
        let text =
            render(&Transcript { header: header(), records: vec![record(Kind::User, "ok")] });
        let mut bytes = text.into_bytes();
        let at = bytes.windows(2).position(|w| w == b"ok").unwrap();
        bytes[at] = 0xe9;
        let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64;
        let e = summarize(&bytes[..]).unwrap().unwrap_err();
        assert_eq!((e.line, e.not_utf8), (line, true), "{e}");
    }

    #[test]
    fn a_record_whose_data_cannot_all_be_read_is_kept_with_what_can() {
        let answer = Record {
            kind: Kind::Assistant,
            meta: Meta { engine: Some("claude".into()), output_tokens: Some(5), ..Meta::default() },
            content: "use a lock file".into(),
        };
        let text = render(&Transcript {
            header: header(),
            records: vec![record(Kind::User, "how do I stop two writers?"), answer],
        });
        let good = r#"{"engine":"claude","output_tokens":5}"#;
        assert!(text.contains(good), "{text}");
        for (bad, engine) in [
            (r#"{"engine":"claude","output_tokens":-5}"#, Some("claude")),
            (r#"{"engine":"claude","output_tokens":"five"}"#, Some("claude")),
            (r#"{"engine":"claude","cost_usd":1e400}"#, None),
            (r#"{"engine":"claude","engine":"gemini"}"#, None),
            (r#"{"engine":"claude","output_tokens":5"#, None),
            ("[1, 2]", None),
        ] {
            let (read, problems) = crate::transcript::parse(&text.replace(good, bad)).unwrap();
            let answer = &read.records[1];
            assert_eq!(
                (answer.kind, answer.content.as_str()),
                (Kind::Assistant, "use a lock file"),
                "{bad}"
            );
            assert_eq!(answer.meta.output_tokens, None, "{bad}");
            if let Some(engine) = engine {
                assert_eq!(answer.meta.engine.as_deref(), Some(engine), "{bad}");
            }
            assert_eq!(problems.len(), 1, "{bad}: {problems:?}");
            assert!(problems[0].message.contains("the record is kept"), "{problems:?}");
            // And as the next turn reads it: the exchange is there.
            let summary = summarize(text.replace(good, bad).as_bytes()).unwrap().unwrap();
            assert_eq!(summary.live.exchanges.len(), 1, "{bad} {summary:?}");
        }
    }

    #[test]
    fn a_header_whose_own_fields_read_is_read_without_the_optional_ones_that_do_not() {
        let text = render(&Transcript {
            header: header(),
            records: vec![record(Kind::User, "q"), record(Kind::Assistant, "a")],
        });
        let title = r#""title":"what changed?""#;
        assert!(text.contains(title), "{text}");
        for spoil in [r#""name":5"#, r#""forked_from":"x","model":["m"]"#, r#""imported":{}"#] {
            let spoiled = text.replacen(title, &format!("{title},{spoil}"), 1);
            let (read, problems) = crate::transcript::parse(&spoiled).unwrap();
            assert_eq!((read.header.name, read.records.len()), (None, 2), "{spoil}");
            assert_eq!(problems.len(), 1, "{spoil}: {problems:?}");
            let key = spoil.split('"').nth(1).unwrap();
            assert!(problems[0].message.contains(&format!("`{key}`")), "{problems:?}");
            let summary = summarize(spoiled.as_bytes()).unwrap().unwrap();
            assert_eq!(summary.live.exchanges.len(), 1, "{spoil}");
        }
        // Its own fields are what make it a header.
        let spoiled = text.replacen(title, r#""title":7"#, 1);
        assert!(crate::transcript::parse(&spoiled).is_err());
    }

    #[test]
    fn spaces_after_a_marker_leave_it_a_marker() {
        let t = Transcript {
            header: header(),
            records: vec![record(Kind::User, "q"), record(Kind::Assistant, "a")],
        };
        let text = render(&t).replace("-->\n", "--> \t\n");
        let (read, problems) = crate::transcript::parse(&text).unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(read, t);
    }

    #[test]
    fn very_long_lines_are_content_whatever_the_buffer() {
        let long = format!("{}\n<!-- cca:end -->{}", "x".repeat(200_000), "y".repeat(70_000));
        let t = Transcript {
            header: header(),
            records: vec![
                record(Kind::User, &long),
                record(Kind::Assistant, "```\n".repeat(3).as_str()),
            ],
        };
        let text = render(&t);
        round_trip(&t);
        let mut events = Vec::new();
        let reader = std::io::BufReader::with_capacity(4096, text.as_bytes());
        Scanner::scan(reader, |e| events.push(e)).unwrap().unwrap();
        let spans: Vec<_> = events.iter().filter(|e| matches!(e, Event::Record(_))).collect();
        assert_eq!(spans.len(), 2);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn lines_split_across_reads_scan_the_same(
            contents in proptest::collection::vec((any_kind(), hostile_text()), 0..5),
            capacity in 1usize..40,
            cut in any::<proptest::sample::Index>(),
        ) {
            let records = contents
                .into_iter()
                .map(|(kind, content)| Record { kind, meta: Meta::default(), content })
                .collect();
            let text = render(&Transcript { header: header(), records });
            let at = cut.index(text.len() + 1);
            let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap();
            let text = &text[..at];
            let events = |reader: &mut dyn BufRead| {
                let mut events = Vec::new();
                let result = Scanner::scan(reader, |e| events.push(e)).unwrap().map_err(|e| e.to_string());
                (result, events)
            };
            let whole = events(&mut text.as_bytes());
            let pieces = events(&mut std::io::BufReader::with_capacity(capacity, text.as_bytes()));
            prop_assert_eq!(whole, pieces);
        }
    }
}
