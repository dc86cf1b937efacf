//! Skimming: the [`Scanner`] fed only the lines that decide the record structure, so that
//! `grep` follows a file's records at the cost of a search for markers, not a pass over every
//! line. Gives exactly the scanner's events.

use super::scan::{Event, Line, NotTranscript, Scanner, count_newlines};
use super::{HEAD_MAX, MARKER};

/// A line [`Skim`] has part of: begun at the end of one push, or jumped over and kept in case
/// a marker follows it.
struct KeptLine {
    start: u64,
    end: u64,
    /// The first `HEAD_MAX` bytes, as [`Line::head`].
    head: Vec<u8>,
    whole: bool,
    last: Option<u8>,
}

impl KeptLine {
    fn new(start: u64, text: &[u8]) -> KeptLine {
        let mut kept = KeptLine { start, end: start, head: Vec::new(), whole: true, last: None };
        kept.extend(text);
        kept
    }

    fn extend(&mut self, text: &[u8]) {
        let room = HEAD_MAX.saturating_sub(self.head.len());
        self.whole = self.whole && text.len() <= room;
        self.head.extend_from_slice(&text[..text.len().min(room)]);
        self.end += text.len() as u64;
        self.last = text.last().copied().or(self.last);
    }

    fn line(&self) -> Line<'_> {
        skimmed_line(self.start, self.end, &self.head, self.whole, self.last)
    }
}

/// A line as [`Skim`] hands it to the scanner. Skimming reads only the lines that decide the
/// structure; a line cut at `HEAD_MAX` is taken as UTF-8 (its head may end inside a character).
fn skimmed_line(start: u64, end: u64, head: &[u8], whole: bool, last: Option<u8>) -> Line<'_> {
    let utf8 = !whole || std::str::from_utf8(head).is_ok();
    Line { start, end, head, whole, cr: last == Some(b'\r'), utf8, ended: true }
}

/// The [`Scanner`], fed only the lines that decide the record structure: marker lines, the few
/// lines after each, and the last line before each. Content lines between are counted, never
/// looked at, so following a file's records costs a search for markers instead of a pass over
/// every line. The events are exactly the scanner's but notes (a property test holds it to that).
///
/// Push-driven, so the caller decides where bytes come from (`grep` hands over the buffer it
/// is searching, and reads ahead only when a record runs past it), and can stop early: a push
/// returns once the place asked about is settled.
pub struct Skim {
    scanner: Scanner,
    /// File offset of the next byte a push must start with.
    next: u64,
    /// A line whose end has not been pushed yet.
    split: Option<KeptLine>,
    /// The last line jumped over: given to the scanner if a marker line comes next.
    held: Option<KeptLine>,
    finished: bool,
}

/// A newline followed by the start of a marker: where [`Skim`] jumps to.
static NEXT_MARKER: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\n<!-- cca:"));

impl Default for Skim {
    fn default() -> Self {
        Self::new()
    }
}

impl Skim {
    pub fn new() -> Self {
        Skim { scanner: Scanner::new(), next: 0, split: None, held: None, finished: false }
    }

    /// The file offset the next push must start at.
    pub fn offset(&self) -> u64 {
        self.next
    }

    /// Whether everything up to and including the line that ends at `end` (the offset of its
    /// newline) has been read, and no record is open: the record holding that line, if any,
    /// has been reported.
    pub fn settled_past(&self, end: u64) -> bool {
        // A line begun and not ended lies past `end`, so it cannot change what `end` is in.
        self.finished || (self.next > end && self.scanner.settled())
    }

    /// Reads `bytes`, the file's bytes from [`Self::offset`], until [`Self::settled_past`]
    /// holds for `end` or the bytes run out. Returns how many bytes it used.
    pub fn push(
        &mut self,
        bytes: &[u8],
        end: u64,
        on_event: &mut impl FnMut(Event),
    ) -> Result<usize, NotTranscript> {
        let base = self.next;
        let mut pos = 0;
        if let Some(mut split) = self.split.take() {
            let Some(p) = memchr::memchr(b'\n', bytes) else {
                split.extend(bytes);
                self.split = Some(split);
                self.next += bytes.len() as u64;
                return Ok(bytes.len());
            };
            split.extend(&bytes[..p]);
            if split.head.starts_with(MARKER) || self.scanner.needs_every_line() {
                self.feed(&split.line(), on_event)?;
            } else {
                self.hold(split);
            }
            pos = p + 1;
        }
        while pos < bytes.len() {
            let at = base + pos as u64;
            if at > end && self.scanner.settled() {
                break;
            }
            let rest = &bytes[pos..];
            let maybe_marker =
                rest.starts_with(MARKER) || (rest.len() < MARKER.len() && MARKER.starts_with(rest));
            if maybe_marker || self.scanner.needs_every_line() {
                match memchr::memchr(b'\n', rest) {
                    Some(p) => {
                        let text = &rest[..p];
                        let head = &text[..p.min(HEAD_MAX)];
                        let line = skimmed_line(
                            at,
                            at + p as u64,
                            head,
                            p <= HEAD_MAX,
                            text.last().copied(),
                        );
                        self.feed(&line, on_event)?;
                        pos += p + 1;
                    }
                    None => {
                        self.split = Some(KeptLine::new(at, rest));
                        pos = bytes.len();
                    }
                }
                continue;
            }
            // Jump to the next marker line; of the lines jumped over, only the last can matter.
            match NEXT_MARKER.find(rest) {
                Some(i) => {
                    let last_start = memchr::memrchr(b'\n', &rest[..i]).map_or(0, |k| k + 1);
                    self.drop_held();
                    self.scanner.line_no += count_newlines(&rest[..last_start]);
                    let text = &rest[last_start..i];
                    let head = &text[..text.len().min(HEAD_MAX)];
                    let (start, whole) = (at + last_start as u64, text.len() <= HEAD_MAX);
                    let line =
                        skimmed_line(start, at + i as u64, head, whole, text.last().copied());
                    self.feed(&line, on_event)?;
                    pos += i + 1;
                }
                None => match memchr::memrchr(b'\n', rest) {
                    // The next line is not here yet: keep the last one until it is.
                    Some(j) => {
                        let last_start = memchr::memrchr(b'\n', &rest[..j]).map_or(0, |k| k + 1);
                        self.drop_held();
                        self.scanner.line_no += count_newlines(&rest[..last_start]);
                        self.hold(KeptLine::new(at + last_start as u64, &rest[last_start..j]));
                        pos += j + 1;
                    }
                    None => {
                        self.split = Some(KeptLine::new(at, rest));
                        pos = bytes.len();
                    }
                },
            }
        }
        self.next = base + pos as u64;
        Ok(pos)
    }

    /// The end of the file: a last line without a newline, and a record left open.
    pub fn finish(&mut self, on_event: &mut impl FnMut(Event)) -> Result<(), NotTranscript> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        if let Some(split) = self.split.take() {
            self.feed(&Line { ended: false, ..split.line() }, on_event)?;
        }
        self.drop_held();
        std::mem::take(&mut self.scanner).finish(on_event)
    }

    fn feed(&mut self, line: &Line, on_event: &mut impl FnMut(Event)) -> Result<(), NotTranscript> {
        // Most lines between records are jumped over: the few fed are not reported as notes.
        let mut on_event = |e| {
            if !matches!(e, Event::Note { .. }) {
                on_event(e)
            }
        };
        if let Some(held) = self.held.take() {
            self.scanner.line(&held.line(), &mut on_event)?;
        }
        self.scanner.line(line, &mut on_event)
    }

    fn hold(&mut self, line: KeptLine) {
        self.drop_held();
        self.held = Some(line);
    }

    /// A held line followed by another content line: it only needs counting.
    fn drop_held(&mut self) {
        if self.held.take().is_some() {
            self.scanner.line_no += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::transcript::testing::{self, any_kind, hostile_text, record};
    use crate::transcript::{Header, Kind, Meta, Record, Transcript, render};

    fn header() -> Header {
        testing::header("what changed?")
    }

    /// The events a [`Skim`] reports, fed `text` in pieces of the given sizes, asked to settle
    /// at the given places in turn (then everything).
    fn skimmed(text: &[u8], sizes: &[usize], ends: &[u64]) -> (Result<(), String>, Vec<Event>) {
        let mut skim = Skim::new();
        let mut events = Vec::new();
        let mut on_event = |e| events.push(e);
        let (mut sizes, mut ends) = (sizes.iter().cycle(), ends.iter());
        let result = loop {
            let at = skim.offset() as usize;
            if at >= text.len() {
                break skim.finish(&mut on_event);
            }
            let n = sizes.next().copied().unwrap_or(usize::MAX).clamp(1, text.len() - at);
            let end = ends.next().copied().unwrap_or(u64::MAX);
            if let Err(e) = skim.push(&text[at..at + n], end, &mut on_event) {
                break Err(e);
            }
        };
        (result.map_err(|e| e.to_string()), events)
    }

    /// The scanner's events but notes: skimming jumps over most lines between records, and
    /// what reads through a skim (grep) has no use for notes.
    fn scanned(text: &[u8]) -> (Result<(), String>, Vec<Event>) {
        let mut events = Vec::new();
        let result = Scanner::scan(text, |e| events.push(e)).unwrap().map_err(|e| e.to_string());
        events.retain(|e| !matches!(e, Event::Note { .. }));
        (result, events)
    }

    #[test]
    fn skimming_sees_what_scanning_sees() {
        let t = Transcript {
            header: header(),
            records: vec![
                record(Kind::User, "q\n\\<!-- cca:end -->\n"),
                record(Kind::Attachment, "```\ndiff\n```"),
                record(Kind::Assistant, "```py\nx = 1"),
                record(Kind::Assistant, &"long line ".repeat(10_000)),
            ],
        };
        let text = render(&t);
        let mut damaged = text.clone();
        damaged.push_str("\n<!-- cca:user -->\n## 2. You\n\ncut off\nhere");
        let between = text.replace(
            "<!-- cca:end -->\n\n<!-- cca:attachment",
            "<!-- cca:end -->\nnote\n\n<!-- cca:attachment",
        );
        for text in [&text, &damaged, &between, &"not a transcript\n".to_string()] {
            let whole = scanned(text.as_bytes());
            for size in [1, 2, 7, 64, 4096, usize::MAX] {
                assert_eq!(skimmed(text.as_bytes(), &[size], &[]), whole, "size {size}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn skimming_sees_what_scanning_sees_on_any_input(
            contents in proptest::collection::vec((any_kind(), hostile_text()), 0..6),
            junk in hostile_text(),
            cut in any::<proptest::sample::Index>(),
            sizes in proptest::collection::vec(1usize..200, 1..8),
            ends in proptest::collection::vec(0u64..4000, 0..8),
        ) {
            let records = contents
                .into_iter()
                .map(|(kind, content)| Record { kind, meta: Meta::default(), content })
                .collect();
            let text = render(&Transcript { header: header(), records });
            // Damage of every kind: a cut anywhere, then anything at all after it.
            let at = cut.index(text.len() + 1);
            let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap();
            let text = format!("{}{junk}", &text[..at]);
            let ends: Vec<u64> = { let mut e = ends; e.sort(); e };
            prop_assert_eq!(skimmed(text.as_bytes(), &sizes, &ends), scanned(text.as_bytes()));
        }
    }
}
