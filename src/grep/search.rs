//! Searching one transcript: its buffers read, each line the pattern hits placed in its record
//! and exchange by a [`Skim`] that follows the records from marker to marker, and handed to
//! the sink.

use std::io;
use std::ops::Range;
use std::rc::Rc;

use chrono::{DateTime, Utc};

use super::{AHEAD, ESCAPED, MARKER, Matcher, Options, Place, Role, Shown, Sink, Source, read_at};
use crate::transcript::{Event, Header, Kind, NotTranscript, Skim};

/// Numbers exchanges as the transcript's headings do (see `transcript::Summarizer`): a question
/// and its answer make one; a failure, a clear or damage ends a question unanswered. Feed it
/// every record and problem in file order.
#[derive(Debug, Default)]
pub(crate) struct Numbering {
    exchanges: u64,
    pending_user: bool,
}

impl Numbering {
    /// The exchange a record belongs to.
    pub(crate) fn record(&mut self, kind: Kind) -> u64 {
        let turn = self.exchanges + 1;
        match kind {
            Kind::User => self.pending_user = true,
            Kind::Assistant if self.pending_user => {
                self.exchanges += 1;
                self.pending_user = false;
            }
            Kind::Failed | Kind::Interrupted | Kind::Clear => self.pending_user = false,
            Kind::Assistant | Kind::Attachment | Kind::Compaction => {}
        }
        turn
    }

    /// Damage in the file: the question before it has no answer.
    pub(crate) fn problem(&mut self) {
        self.pending_user = false;
    }

    /// Whether a record of this kind, next, would be an answer with no question before it: no
    /// exchange's, and never sent (the live context ignores it).
    pub(crate) fn stray(&self, kind: Kind) -> bool {
        kind == Kind::Assistant && !self.pending_user
    }

    /// The exchanges so far.
    pub(crate) fn exchanges(&self) -> u64 {
        self.exchanges
    }
}

/// What the skim has told of the records so far.
#[derive(Default)]
pub(super) struct Places {
    pub(super) header: Option<Header>,
    pub(super) numbering: Numbering,
    /// The last record completed (shared with the lines shown from it).
    pub(super) last: Option<Rc<Place>>,
}

impl Places {
    fn event(&mut self, event: Event) {
        match event {
            Event::Header(header, _) => self.header = Some(header),
            Event::Problem(_) => self.numbering.problem(),
            Event::PartlyRead(_) | Event::Note { .. } => {}
            Event::Record(span) => {
                let stray = self.numbering.stray(span.kind);
                let turn = self.numbering.record(span.kind);
                let (kind, meta, content) = (span.kind, span.meta, span.content);
                let place = Place { kind, meta, turn, stray, content };
                self.last = Some(Rc::new(place));
            }
        }
    }
}

pub(super) struct Search<'a, S: Source + ?Sized> {
    pub(super) source: &'a S,
    pub(super) matcher: &'a Matcher,
    pub(super) opts: &'a Options,
    /// Whole lines of the file from `start`, `filled` bytes of it; a last line may be partial.
    pub(super) buf: Vec<u8>,
    pub(super) start: u64,
    pub(super) filled: usize,
    pub(super) eof: bool,
    /// Where in `buf` the search goes on.
    pub(super) searched: usize,
    /// The next escaped content line in `buf` at or after `searched`, once looked for.
    pub(super) escaped_at: Option<Option<usize>>,
    pub(super) skim: Skim,
    /// Bytes read past `buf` for the skim (a record with a hit that runs on), from `ahead_at`.
    pub(super) ahead: Vec<u8>,
    pub(super) ahead_at: u64,
    pub(super) places: Places,
    /// Line numbers: `counted` newlines lie before offset `counted_to`.
    pub(super) counted_to: u64,
    pub(super) counted: u64,
    /// The file offset where the last line shown ends.
    pub(super) printed_end: Option<u64>,
    /// Context still owed after the last match: lines, the record, where its content ends.
    pub(super) after: Option<(usize, Rc<Place>)>,
    pub(super) found: Vec<Range<usize>>,
    pub(super) matched: u64,
}

/// Whether a search goes on.
type Going = io::Result<Result<bool, NotTranscript>>;

impl<S: Source + ?Sized> Search<'_, S> {
    pub(super) fn run(&mut self, sink: &mut impl Sink) -> io::Result<Result<u64, NotTranscript>> {
        self.read()?;
        if let Err(e) = self.settle(0)? {
            return Ok(Err(e));
        }
        let header = self.places.header.as_ref().expect("a settled skim has read the header");
        if !sink.header(header) {
            return Ok(Ok(0));
        }
        loop {
            let whole_lines = if self.eof {
                self.filled
            } else {
                memchr::memrchr(b'\n', &self.buf[..self.filled]).map_or(0, |i| i + 1)
            };
            let complete = whole_lines.max(self.searched);
            while let Some((line, escaped)) = self.next_candidate(complete) {
                self.searched = line.end + 1;
                match self.candidate(line, escaped, sink)? {
                    Ok(true) => {}
                    Ok(false) => return Ok(Ok(self.matched)),
                    Err(e) => return Ok(Err(e)),
                }
            }
            self.searched = complete;
            if !self.context_after(self.start + complete as u64, complete, sink) {
                return Ok(Ok(self.matched));
            }
            if self.eof {
                return Ok(Ok(self.matched));
            }
            self.refill(complete)?;
        }
    }

    /// Reads on until the buffer is full or the file ends. A short read is followed by another
    /// to find the end, so a transcript that fits the buffer is searched in one go.
    fn read(&mut self) -> io::Result<()> {
        if self.filled == self.buf.len() {
            // A line longer than the buffer: the buffer grows to hold it.
            self.buf.resize(self.buf.len() * 2, 0);
        }
        while self.filled < self.buf.len() {
            let at = self.start + self.filled as u64;
            let n = read_at(self.source, &mut self.buf[self.filled..], at)?;
            if n == 0 {
                self.eof = true;
                break;
            }
            self.filled += n;
        }
        Ok(())
    }

    /// Moves on past the searched lines, keeping the lines before-context may need.
    fn refill(&mut self, complete: usize) -> io::Result<()> {
        let mut keep = complete;
        for _ in 0..self.opts.context {
            if keep == 0 {
                break;
            }
            keep = memchr::memrchr(b'\n', &self.buf[..keep - 1]).map_or(0, |i| i + 1);
        }
        if self.opts.positions {
            self.count_lines_to(self.start + keep as u64);
        }
        self.buf.copy_within(keep..self.filled, 0);
        self.start += keep as u64;
        self.filled -= keep;
        self.searched = complete - keep;
        self.escaped_at = None;
        self.read()
    }

    /// The next line to look at: where the regex hits, or an escaped line (matched unescaped,
    /// so the buffer-wide search cannot speak for it).
    fn next_candidate(&mut self, complete: usize) -> Option<(Range<usize>, bool)> {
        if self.searched >= complete {
            return None;
        }
        let hay = &self.buf[..complete];
        // The earliest end of any match is enough to find the first line that may hold one: a
        // match inside an earlier line would end earlier. No reverse scan for where it starts.
        let hit = self.matcher.regex.shortest_match_at(hay, self.searched).and_then(|end| {
            let start = memchr::memrchr(b'\n', &hay[..end]).map_or(0, |i| i + 1);
            // A match that ends where the complete lines end belongs to no line here.
            (start < complete).then_some(start)
        });
        let escaped = self.next_escaped(complete);
        let (start, is_escaped) = match (hit, escaped) {
            (None, None) => return None,
            (Some(h), Some(e)) if e <= h => (e, true),
            (Some(h), _) => (h, false),
            (None, Some(e)) => (e, true),
        };
        let hay = &self.buf[..complete];
        let end = memchr::memchr(b'\n', &hay[start..]).map_or(complete, |i| start + i);
        Some((start..end, is_escaped))
    }

    fn next_escaped(&mut self, complete: usize) -> Option<usize> {
        if !self.matcher.line_start {
            return None;
        }
        if let Some(cached) = self.escaped_at
            && cached.is_none_or(|at| at >= self.searched)
        {
            return cached;
        }
        let hay = &self.buf[..complete];
        let mut from = self.searched;
        let found = loop {
            let Some(i) = ESCAPED.find(&hay[from..]) else { break None };
            let at = from + i;
            let start = hay[..at].iter().rposition(|&b| b != b'\\').map_or(0, |p| p + 1);
            if start == 0 || hay[start - 1] == b'\n' {
                break Some(start);
            }
            from = at + 1;
        };
        self.escaped_at = Some(found);
        found
    }

    /// Reads the structure on until the line ending at `end` is placed.
    fn settle(&mut self, end: u64) -> io::Result<Result<(), NotTranscript>> {
        let places = &mut self.places;
        let mut on_event = |e| places.event(e);
        while !self.skim.settled_past(end) {
            let at = self.skim.offset();
            let buf_end = self.start + self.filled as u64;
            let bytes = if at >= self.start && at < buf_end {
                &self.buf[(at - self.start) as usize..self.filled]
            } else {
                let ahead_end = self.ahead_at + self.ahead.len() as u64;
                if !(at >= self.ahead_at && at < ahead_end) {
                    self.ahead.resize(AHEAD, 0);
                    let n = read_at(self.source, &mut self.ahead, at)?;
                    self.ahead.truncate(n);
                    self.ahead_at = at;
                }
                &self.ahead[(at - self.ahead_at) as usize..]
            };
            if bytes.is_empty() {
                return Ok(self.skim.finish(&mut on_event));
            }
            if let Err(e) = self.skim.push(bytes, end, &mut on_event) {
                return Ok(Err(e));
            }
        }
        Ok(Ok(()))
    }

    /// A line the search hit: shown if it is content, wanted, and matches on its own.
    fn candidate(&mut self, line: Range<usize>, escaped: bool, sink: &mut impl Sink) -> Going {
        let (start, end) = (self.start + line.start as u64, self.start + line.end as u64);
        if let Err(e) = self.settle(end)? {
            return Ok(Err(e));
        }
        // In a file saved with CRLF endings the `\r` ends the line, not the record's content:
        // the last line of a question is its content and a `\r` past it.
        let text_end = end - u64::from(self.buf[line.clone()].last() == Some(&b'\r'));
        let Some(place) = self.places.last.as_ref().filter(|p| contains(p, start, text_end)) else {
            return Ok(Ok(true));
        };
        if !self.wanted(place) {
            return Ok(Ok(true));
        }
        let place = Rc::clone(place);
        // A hit of the buffer-wide search may be on an escaped line too.
        let raw = &self.buf[line.clone()];
        let text = as_written(raw, escaped || is_escaped(raw));
        let is_match = if self.opts.positions {
            self.matcher.find_in(text, &mut self.found);
            !self.found.is_empty()
        } else {
            self.matcher.regex.is_match(text)
        };
        if !is_match {
            return Ok(Ok(true));
        }
        self.matched += 1;
        if !self.context_after(start, line.start, sink) || !self.context_before(&line, &place, sink)
        {
            return Ok(Ok(false));
        }
        let found = std::mem::take(&mut self.found);
        let going = self.show(line.clone(), &place, Some(&found), sink);
        self.found = found;
        if self.opts.context > 0 {
            self.after = Some((self.opts.context, place));
        }
        Ok(Ok(going && !self.opts.first_only))
    }

    fn wanted(&self, place: &Place) -> bool {
        if self.opts.role.is_some_and(|role| role != Role::of(place.kind)) {
            return false;
        }
        if self.opts.since.is_none() && self.opts.until.is_none() {
            return true;
        }
        let created = self.places.header.as_ref().map(|h| h.created.as_str());
        let Some(at) =
            place.meta.at.as_deref().or(created).and_then(|at| {
                DateTime::parse_from_rfc3339(at).ok().map(|t| t.with_timezone(&Utc))
            })
        else {
            return false;
        };
        self.opts.since.is_none_or(|since| at >= since)
            && self.opts.until.is_none_or(|until| at <= until)
    }

    /// Up to `context` lines before a match, of its record, not shown yet.
    fn context_before(&mut self, line: &Range<usize>, place: &Place, sink: &mut impl Sink) -> bool {
        let mut first = line.start;
        for _ in 0..self.opts.context {
            if first == 0 {
                break;
            }
            let prev = memchr::memrchr(b'\n', &self.buf[..first - 1]).map_or(0, |i| i + 1);
            let at = self.start + prev as u64;
            if at < place.content.start || self.printed_end.is_some_and(|p| at <= p) {
                break;
            }
            first = prev;
        }
        while first < line.start {
            let end = first + memchr::memchr(b'\n', &self.buf[first..]).expect("a whole line");
            if !self.show(first..end, place, None, sink) {
                return false;
            }
            first = end + 1;
        }
        true
    }

    /// Context owed after the last match, up to `limit` (a file offset), from the buffer's
    /// whole lines (they end by `complete`).
    fn context_after(&mut self, limit: u64, complete: usize, sink: &mut impl Sink) -> bool {
        while let Some((left, place)) = self.after.take() {
            let from = self.printed_end.map_or(0, |p| p + 1);
            if left == 0 || from > place.content.end {
                return true;
            }
            let rel = (from - self.start) as usize;
            let end = match memchr::memchr(b'\n', &self.buf[rel..complete]) {
                Some(i) => rel + i,
                None if self.eof && rel < complete => complete,
                // The next match comes first, or the line is not whole in the buffer yet.
                None => {
                    self.after = Some((left, place));
                    return true;
                }
            };
            if from >= limit {
                self.after = Some((left, place));
                return true;
            }
            if self.start + end as u64 > place.content.end {
                return true;
            }
            if !self.show(rel..end, &place, None, sink) {
                return false;
            }
            self.after = Some((left - 1, place));
        }
        true
    }

    /// Hands a line of the buffer to the sink, unescaped and without its line ending.
    fn show(
        &mut self,
        line: Range<usize>,
        place: &Place,
        matches: Option<&[Range<usize>]>,
        sink: &mut impl Sink,
    ) -> bool {
        let start = self.start + line.start as u64;
        if self.opts.context > 0 && self.printed_end.is_some_and(|p| p + 1 != start) && !sink.gap()
        {
            return false;
        }
        self.printed_end = Some(self.start + line.end as u64);
        let number = if self.opts.positions { self.line_number(start) } else { 0 };
        let raw = &self.buf[line];
        let text = as_written(raw, is_escaped(raw));
        let context = matches.is_none();
        sink.line(&Shown { place, number, text, context, matches: matches.unwrap_or_default() })
    }

    /// The line number of the line starting at `start` (asked in order).
    fn line_number(&mut self, start: u64) -> u64 {
        self.count_lines_to(start);
        self.counted + 1
    }

    fn count_lines_to(&mut self, to: u64) {
        if to > self.counted_to {
            let from = (self.counted_to - self.start) as usize;
            let to_rel = (to - self.start) as usize;
            self.counted += crate::transcript::count_newlines(&self.buf[from..to_rel]);
            self.counted_to = to;
        }
    }
}

/// Whether a line is content of the record (a clear has none: its line is cca's).
fn contains(place: &Place, start: u64, end: u64) -> bool {
    place.kind != Kind::Clear && place.content.start <= start && end <= place.content.end
}

/// A content line as it was written: without the transcript's escape, and without its line
/// ending (`\r\n` as well as `\n`). This is what a pattern is matched against.
fn as_written(line: &[u8], escaped: bool) -> &[u8] {
    let line = if escaped { &line[1..] } else { line };
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A content line the transcript stores with one more backslash (see `transcript`).
fn is_escaped(line: &[u8]) -> bool {
    let slashes = line.iter().take_while(|&&b| b == b'\\').count();
    slashes > 0 && line[slashes..].starts_with(MARKER)
}
