//! Writing transcripts: the header, records whole or streamed, and the one escape rule that
//! keeps content from ever reading as a marker. Code fences the content leaves open are closed
//! (and marked, so reading drops the added fence again). See docs/DESIGN.md, section 3.

use serde::Serialize;

#[cfg(any(test, feature = "testing"))]
use super::Transcript;
use super::{END_FENCE_LINE, END_LINE, Header, Kind, MARKER, Meta, Record};

/// The header block that opens a transcript.
pub fn render_header(h: &Header) -> String {
    let title = one_line(&h.title, 200);
    let mut info = format!(
        "*cca session `{}` · started {} · {} · prompt `{}`",
        one_line(&h.id, 80),
        one_line(&h.created, 40),
        one_line(&h.engine, 40),
        one_line(&h.prompt, 120)
    );
    if let Some(f) = &h.forked_from {
        info.push_str(&format!(" · forked from `{}` at turn {}", one_line(&f.session, 80), f.turn));
    }
    if let Some(name) = &h.name {
        info.push_str(&format!(" · named `{}`", one_line(name, 80)));
    }
    if let Some(i) = &h.imported {
        info.push_str(&format!(" · imported from {}", one_line(&i.tool, 40)));
    }
    info.push('*');
    let title = if title.is_empty() { "(untitled)".to_string() } else { title };
    format!("{}\n# {title}\n\n{info}\n{END_LINE}\n", marker_line("session", &to_json(h)))
}

/// One record, ready to append: a blank separator line, marker, heading, content, end marker.
/// `turn` is the exchange number the record belongs to, shown in the heading.
pub fn render_record(r: &Record, turn: u64) -> String {
    let mut out = open_record(r.kind, &r.meta, turn);
    // An image's record holds a link to its copy, unfenced, so that a viewer shows the image.
    if r.kind == Kind::Attachment && r.meta.media_type.is_none() {
        let fence = crate::fence::for_text(&r.content);
        out.push_str(&fence);
        out.push('\n');
        escape_markers_into(&r.content, &mut out);
        out.push('\n');
        out.push_str(&fence);
        out.push('\n');
        out.push_str(END_LINE);
        out.push('\n');
    } else {
        let mut body = BodyWriter::new();
        let mut bytes = Vec::with_capacity(r.content.len() + 64);
        body.push(r.content.as_bytes(), &mut bytes);
        body.finish(&mut bytes);
        out.push_str(std::str::from_utf8(&bytes).expect("escaping keeps UTF-8"));
    }
    out
}

/// The whole file for a transcript; turn numbers in headings are derived from the records.
#[cfg(any(test, feature = "testing"))]
pub fn render(t: &Transcript) -> String {
    let mut out = render_header(&t.header);
    let mut done = 0;
    for r in &t.records {
        let turn = done + 1;
        out.push_str(&render_record(r, turn));
        if r.kind == Kind::Assistant {
            done += 1;
        }
    }
    out
}

/// Marker, heading and the blank line before content: the part of a record written before its
/// content. Content then goes through a [`BodyWriter`].
pub fn open_record(kind: Kind, meta: &Meta, turn: u64) -> String {
    let json = to_json(meta);
    format!("\n{}\n{}\n\n", marker_line(kind.word(), &json), heading(kind, meta, turn))
}

fn heading(kind: Kind, meta: &Meta, turn: u64) -> String {
    let who = |m: &Meta| match (&m.engine, &m.model) {
        (Some(e), Some(model)) => format!("{} ({})", one_line(e, 40), one_line(model, 60)),
        (Some(e), None) => one_line(e, 40),
        _ => "answer".to_string(),
    };
    match kind {
        Kind::User => format!("## {turn}. You"),
        Kind::Attachment => {
            let name = one_line(meta.name.as_deref().unwrap_or("context"), 80);
            match meta.bytes {
                Some(n) => format!("#### Attached: {name} ({})", crate::human::human_bytes(n)),
                None => format!("#### Attached: {name}"),
            }
        }
        Kind::Assistant => {
            let secs = meta.duration_ms.map(|ms| format!(" · {:.1} s", ms as f64 / 1000.0));
            format!("## {turn}. {}{}", who(meta), secs.unwrap_or_default())
        }
        Kind::Failed => format!(
            "### {turn}. No answer (not sent again): {}",
            one_line(meta.reason.as_deref().unwrap_or("the attempt failed"), 160)
        ),
        Kind::Interrupted => format!(
            "### {turn}. Interrupted (not sent again): {}",
            one_line(meta.reason.as_deref().unwrap_or("stopped"), 160)
        ),
        Kind::Clear => "### Context cleared: the turns above are not sent again".to_string(),
        Kind::Compaction => format!(
            "### Summary of {} (sent in their place)",
            crate::human::turns(meta.first.unwrap_or(1), meta.through.unwrap_or(0))
        ),
    }
}

fn marker_line(word: &str, json: &str) -> String {
    if json == "{}" {
        format!("<!-- cca:{word} -->")
    } else {
        format!("<!-- cca:{word} {json} -->")
    }
}

/// JSON that can sit inside an HTML comment: `--` never appears (so neither can `-->`).
fn to_json<T: Serialize>(value: &T) -> String {
    let json = serde_json::to_string(value).expect("plain data serializes");
    // `--` only occurs inside JSON strings, where `\u002d` is the same character.
    json.replace("--", "-\\u002d")
}

/// The line of a question its session is titled by: its first with words on it (a question
/// may open with blank lines).
pub fn title_line(question: &str) -> &str {
    question.lines().find(|l| !l.trim().is_empty()).unwrap_or("")
}

/// Text made safe for a one-line heading: control characters, and bidirectional overrides that
/// would reorder the line as shown (`render::moves_the_terminal`), become spaces; long text is
/// cut.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if crate::render::moves_the_terminal(c) { ' ' } else { c })
        .collect::<String>();
    let flat = flat.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max_chars {
        let cut: String = flat.chars().take(max_chars.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Writes record content in transcript form, streaming: marker-like lines escaped, and a code
/// fence the content leaves open closed by cca after it (marked so reading drops it again).
pub struct BodyWriter {
    escape: MarkerEscaper,
    fences: FenceTracker,
}

impl Default for BodyWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BodyWriter {
    pub fn new() -> Self {
        BodyWriter {
            escape: MarkerEscaper::new(Direction::Escape),
            fences: FenceTracker::default(),
        }
    }

    pub fn push(&mut self, content: &[u8], out: &mut Vec<u8>) {
        self.fences.push(content);
        self.escape.push(content, out);
    }

    /// Ends the content: newline, the closing fence if one is open, and the end marker.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        self.escape.finish(out);
        self.fences.push(b"\n");
        out.push(b'\n');
        match self.fences.open_fence() {
            Some(fence) => {
                out.extend_from_slice(fence.as_bytes());
                out.extend_from_slice(b"\n");
                out.extend_from_slice(END_FENCE_LINE.as_bytes());
            }
            None => out.extend_from_slice(END_LINE.as_bytes()),
        }
        out.push(b'\n');
    }
}

fn escape_markers_into(content: &str, out: &mut String) {
    let mut bytes = Vec::with_capacity(content.len() + 16);
    let mut esc = MarkerEscaper::new(Direction::Escape);
    esc.push(content.as_bytes(), &mut bytes);
    esc.finish(&mut bytes);
    out.push_str(std::str::from_utf8(&bytes).expect("escaping keeps UTF-8"));
}

/// Content as stored (escaped) back to content as written.
pub fn unescape(stored: &str) -> String {
    let mut bytes = Vec::with_capacity(stored.len());
    let mut esc = MarkerEscaper::new(Direction::Unescape);
    esc.push(stored.as_bytes(), &mut bytes);
    esc.finish(&mut bytes);
    String::from_utf8(bytes).expect("unescaping keeps UTF-8")
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Direction {
    Escape,
    Unescape,
}

/// Adds (or removes) one backslash before `<!-- cca:` at the start of a line, when only
/// backslashes stand before it. Streaming: chunks may split lines anywhere.
#[derive(Debug)]
pub struct MarkerEscaper {
    direction: Direction,
    state: LineState,
}

#[derive(Debug, Clone, Copy)]
enum LineState {
    /// At the start of a line, or inside its leading backslashes / marker prefix.
    Start { slashes: u64, matched: usize },
    /// Past the point where the line could be a marker.
    Rest,
}

impl MarkerEscaper {
    pub fn new(direction: Direction) -> Self {
        MarkerEscaper { direction, state: LineState::Start { slashes: 0, matched: 0 } }
    }

    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                LineState::Rest => match memchr::memchr(b'\n', &input[i..]) {
                    Some(p) => {
                        out.extend_from_slice(&input[i..=i + p]);
                        i += p + 1;
                        self.state = LineState::Start { slashes: 0, matched: 0 };
                    }
                    None => {
                        out.extend_from_slice(&input[i..]);
                        i = input.len();
                    }
                },
                LineState::Start { slashes, matched } => {
                    let b = input[i];
                    if matched == 0 && b == b'\\' {
                        self.state = LineState::Start { slashes: slashes + 1, matched: 0 };
                        i += 1;
                    } else if b == MARKER[matched] {
                        i += 1;
                        if matched + 1 == MARKER.len() {
                            let slashes = match self.direction {
                                Direction::Escape => slashes + 1,
                                Direction::Unescape => slashes.saturating_sub(1),
                            };
                            push_slashes(out, slashes);
                            out.extend_from_slice(MARKER);
                            self.state = LineState::Rest;
                        } else {
                            self.state = LineState::Start { slashes, matched: matched + 1 };
                        }
                    } else {
                        // Not a marker line: give back what was held, then copy on.
                        push_slashes(out, slashes);
                        out.extend_from_slice(&MARKER[..matched]);
                        self.state = LineState::Rest;
                    }
                }
            }
        }
    }

    pub fn finish(&mut self, out: &mut Vec<u8>) {
        if let LineState::Start { slashes, matched } = self.state {
            push_slashes(out, slashes);
            out.extend_from_slice(&MARKER[..matched]);
        }
        self.state = LineState::Start { slashes: 0, matched: 0 };
    }
}

fn push_slashes(out: &mut Vec<u8>, n: u64) {
    out.extend(std::iter::repeat_n(b'\\', n as usize));
}

/// Follows CommonMark code fences line by line (up to three spaces, then three or more
/// backticks or tildes) to tell whether content leaves one open.
#[derive(Debug, Default)]
struct FenceTracker {
    open: Option<(u8, usize)>,
    line: FenceLine,
}

#[derive(Debug, Clone, Copy, Default)]
enum FenceLine {
    #[default]
    Fresh,
    Indent(usize),
    Run(u8, usize),
    /// After a fence run: `backtick_in_info` forbids a backtick fence, `blank` allows a closer.
    After {
        ch: u8,
        len: usize,
        backtick_in_info: bool,
        blank: bool,
    },
    Plain,
}

impl FenceTracker {
    fn push(&mut self, input: &[u8]) {
        for &b in input {
            if b == b'\n' {
                self.end_line();
                continue;
            }
            self.line = match self.line {
                FenceLine::Fresh | FenceLine::Indent(_) => {
                    let indent = if let FenceLine::Indent(n) = self.line { n } else { 0 };
                    match b {
                        b' ' if indent < 3 => FenceLine::Indent(indent + 1),
                        b'`' | b'~' => FenceLine::Run(b, 1),
                        _ => FenceLine::Plain,
                    }
                }
                FenceLine::Run(ch, len) if b == ch => FenceLine::Run(ch, len + 1),
                FenceLine::Run(ch, len) if len >= 3 => FenceLine::After {
                    ch,
                    len,
                    backtick_in_info: b == b'`',
                    blank: b == b' ' || b == b'\t' || b == b'\r',
                },
                FenceLine::Run(..) => FenceLine::Plain,
                FenceLine::After { ch, len, backtick_in_info, blank } => FenceLine::After {
                    ch,
                    len,
                    backtick_in_info: backtick_in_info || b == b'`',
                    blank: blank && (b == b' ' || b == b'\t' || b == b'\r'),
                },
                FenceLine::Plain => FenceLine::Plain,
            };
        }
    }

    fn end_line(&mut self) {
        let fence = match self.line {
            FenceLine::Run(ch, len) if len >= 3 => Some((ch, len, true, false)),
            FenceLine::After { ch, len, blank, backtick_in_info } => {
                Some((ch, len, blank, backtick_in_info))
            }
            _ => None,
        };
        if let Some((ch, len, blank, backtick_in_info)) = fence {
            match self.open {
                Some((open_ch, open_len)) => {
                    if ch == open_ch && len >= open_len && blank {
                        self.open = None;
                    }
                }
                None => {
                    if !(ch == b'`' && backtick_in_info) {
                        self.open = Some((ch, len));
                    }
                }
            }
        }
        self.line = FenceLine::Fresh;
    }

    fn open_fence(&self) -> Option<String> {
        self.open.map(|(ch, len)| String::from(ch as char).repeat(len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_streams_across_any_chunk_split() {
        let content = "a\n\\\\<!-- cca:end -->\n<!-- cca:x\nz";
        let mut whole = Vec::new();
        let mut esc = MarkerEscaper::new(Direction::Escape);
        esc.push(content.as_bytes(), &mut whole);
        esc.finish(&mut whole);
        for split in 0..content.len() {
            let mut out = Vec::new();
            let mut esc = MarkerEscaper::new(Direction::Escape);
            esc.push(&content.as_bytes()[..split], &mut out);
            esc.push(&content.as_bytes()[split..], &mut out);
            esc.finish(&mut out);
            assert_eq!(out, whole, "split at {split}");
        }
        assert_eq!(unescape(std::str::from_utf8(&whole).unwrap()), content);
    }
}
