//! Markdown for a terminal: a streaming renderer that turns an answer, as it arrives, into styled
//! lines: headings, emphasis, lists, block quotes, inline code, fenced code with syntax
//! highlighting, tables that line up, and links (OSC 8 hyperlinks, or the URL in parentheses).
//!
//! Pure: text in, text out. It never writes to a terminal, asks its size or reads the
//! environment; the caller chooses a [`Style`] and prints what [`Renderer::push`] returns.
//!
//! Streaming is by line. A line is rendered once, when its newline arrives; what it means can
//! depend on the lines before it (inside a code fence, a table, a list) but never on the lines
//! after it, except a table, which is held until its last row so that its columns line up.
//! With [`Style::live`], the unfinished line is shown raw at once, so the first words of an
//! answer appear as they arrive; when its newline comes, the raw text is erased (counting the
//! rows it wrapped onto) and the rendered line is printed in its place.
//!
//! With colours off ([`Style::color`] false: `NO_COLOR`, `TERM=dumb`) the output holds no
//! escape code at all: a plain form where a style that cannot be shown keeps its markdown marker
//! (`**bold**`, `` `code` ``, `## heading`), while layout still applies (bullets, quote bars,
//! aligned tables, `text (url)` links). Syntax highlighting loads its syntaxes on the first code
//! fence that names a language, never before, so commands that render nothing pay nothing.

mod clean;
mod highlight;
mod inline;
mod table;

use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar;

use clean::clean;
pub use clean::{clean_text, moves_the_terminal, shown_id};
use inline::{Attr, Span, inline, spans_width, write_line};
pub(crate) use table::cells;
use table::{Table, delimiter_row, render_table};

/// How output is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Escape codes for colour, bold, hyperlinks and redrawing. Off: plain text, no escape at all.
    pub color: bool,
    /// Links as OSC 8 hyperlinks (with colour only). Off: the URL follows the text in parentheses.
    pub hyperlinks: bool,
    /// The terminal's width in columns: for rules, tables, and the rows a long line wraps onto.
    pub width: usize,
    /// Show the unfinished line raw as it arrives and redraw it when it ends (with colour only:
    /// redrawing takes escape codes). The output must start at the beginning of a line.
    pub live: bool,
}

impl Style {
    /// No escape codes, 80 columns.
    pub fn plain() -> Style {
        Style { color: false, hyperlinks: false, width: 80, live: false }
    }
}

/// Renders a whole text at once.
pub fn render(text: &str, style: Style) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    let mut renderer = Renderer::new(style);
    renderer.push(text, &mut out);
    renderer.finish(&mut out);
    out
}

/// A streaming renderer: [`push`](Renderer::push) text as it arrives, then
/// [`finish`](Renderer::finish).
pub struct Renderer {
    style: Style,
    /// The unfinished line.
    tail: String,
    /// Bytes of `tail` already shown raw (live only), and where the cursor is since the line's
    /// start: rows down and column.
    shown: usize,
    row: usize,
    col: usize,
    /// The unfinished line reached a character [`settled_width`] cannot vouch for.
    stalled: bool,
    block: Block,
    /// Indentation of each open list level, outermost first: a bullet's depth picks its glyph.
    lists: Vec<usize>,
}

enum Block {
    Text,
    Fence(Fence),
    /// A line starting with `|`: a table's header if the next line is a delimiter row.
    TableHead(String),
    Table(Table),
}

struct Fence {
    indent: usize,
    marker: u8,
    len: usize,
    code: Option<highlight::Code>,
}

/// Tab stops, every 4 columns (markdown's).
const TAB: usize = 4;
const BULLETS: [&str; 3] = ["•", "◦", "▪"];

/// Colours of the terminal's own palette, so that they suit its background, light or dark.
mod palette {
    pub(super) const RED: u8 = 1;
    pub(super) const GREEN: u8 = 2;
    pub(super) const YELLOW: u8 = 3;
    pub(super) const BLUE: u8 = 4;
    pub(super) const MAGENTA: u8 = 5;
    pub(super) const CYAN: u8 = 6;
}

impl Renderer {
    pub fn new(style: Style) -> Renderer {
        Renderer {
            style,
            tail: String::new(),
            shown: 0,
            row: 0,
            col: 0,
            stalled: false,
            block: Block::Text,
            lists: Vec::new(),
        }
    }

    /// Takes the next piece of text; appends to `out` what is ready to print.
    pub fn push(&mut self, text: &str, out: &mut String) {
        let mut rest = text;
        while let Some(end) = rest.find('\n') {
            self.tail.push_str(&rest[..end]);
            self.hide(out);
            let line = std::mem::take(&mut self.tail);
            self.line(&line, out);
            rest = &rest[end + 1..];
        }
        self.tail.push_str(rest);
        if self.live() && !self.stalled {
            self.show(out);
        }
    }

    /// Takes the unfinished line off the screen (live only), so that something else can be
    /// printed; the next [`push`](Renderer::push) shows it again.
    pub fn hide(&mut self, out: &mut String) {
        if self.row > 0 || self.col > 0 {
            out.push('\r');
            if self.row > 0 {
                let _ = write!(out, "\x1b[{}A", self.row);
            }
            out.push_str("\x1b[J");
        }
        self.shown = 0;
        self.row = 0;
        self.col = 0;
        self.stalled = false;
    }

    /// Ends the text: renders its last line (ending it with a newline) and a table still held.
    /// The renderer is then ready for a new text.
    pub fn finish(&mut self, out: &mut String) {
        self.hide(out);
        if !self.tail.is_empty() {
            let line = std::mem::take(&mut self.tail);
            self.line(&line, out);
        }
        match std::mem::replace(&mut self.block, Block::Text) {
            Block::TableHead(head) => self.text_line(&head, out, false),
            Block::Table(table) => render_table(&table, &self.style, out),
            Block::Text | Block::Fence(_) => {}
        }
        self.lists.clear();
    }

    fn live(&self) -> bool {
        self.style.live && self.style.color
    }

    /// Prints the part of the unfinished line not shown yet, as it is, tracking the cursor.
    /// It stops at a character whose width terminals disagree on (emoji, combining marks, most
    /// scripts beyond Latin, Greek, Cyrillic and CJK): counting it wrong would erase a line
    /// above. The rest of that line then appears when it ends.
    fn show(&mut self, out: &mut String) {
        let width = self.style.width.max(1);
        for (at, c) in self.tail[self.shown..].char_indices() {
            let (c, w, times) = match c {
                '\t' => (' ', 1, TAB - self.col % TAB),
                '\r' => continue,
                c => match settled_width(c) {
                    Some(w) => (c, w, 1),
                    None => {
                        self.shown += at;
                        self.stalled = true;
                        break;
                    }
                },
            };
            for _ in 0..times {
                // A character that does not fit goes to the next row (also from the last
                // column, where the cursor waits to wrap).
                if self.col + w > width && self.col > 0 {
                    self.row += 1;
                    self.col = 0;
                }
                self.col += w;
                out.push(c);
            }
        }
        if !self.stalled {
            self.shown = self.tail.len();
        }
    }

    /// One finished line, without its newline.
    fn line(&mut self, raw: &str, out: &mut String) {
        let raw = raw.strip_suffix('\r').unwrap_or(raw);
        let line = clean(raw);
        let line = line.as_ref();
        match &mut self.block {
            Block::Fence(fence) => {
                let trimmed = line.trim();
                if trimmed.len() >= fence.len && trimmed.bytes().all(|b| b == fence.marker) {
                    self.block = Block::Text;
                    // In colour the block is drawn without its fences; plain, it keeps them.
                    if !self.style.color {
                        write_line(&[Span::new(line, Attr::dim())], &self.style, out);
                    }
                    return;
                }
                let keep = indent(line).0.min(fence.indent);
                let (pad, code) = line.split_at(keep);
                let mut spans = vec![Span::new(pad, Attr::default())];
                match &mut fence.code {
                    Some(code_style) => spans.extend(code_style.line(code)),
                    None => spans.push(Span::new(code, Attr::default())),
                }
                write_line(&spans, &self.style, out);
                return;
            }
            Block::TableHead(head) => {
                let head = std::mem::take(head);
                let cells = cells(&head);
                match delimiter_row(line, cells.len()) {
                    Some(aligns) => {
                        let indent = indent(&head).0;
                        let table = Table { indent, head: cells, aligns, rows: Vec::new() };
                        self.block = Block::Table(table);
                        return;
                    }
                    None => {
                        self.block = Block::Text;
                        self.text_line(&head, out, false);
                    }
                }
            }
            Block::Table(table) => {
                if indent(line).1.starts_with('|') {
                    table.rows.push(cells(line));
                    return;
                }
                if let Block::Table(table) = std::mem::replace(&mut self.block, Block::Text) {
                    render_table(&table, &self.style, out);
                }
            }
            Block::Text => {}
        }
        self.text_line(line, out, true);
    }

    /// A line outside code and tables.
    fn text_line(&mut self, line: &str, out: &mut String, may_start_table: bool) {
        if line.trim().is_empty() {
            out.push('\n');
            return;
        }
        let (ind, rest) = indent(line);
        if let Some((marker, len, info)) = fence_open(rest) {
            if ind == 0 {
                self.lists.clear();
            }
            let language = info.split_whitespace().next().unwrap_or("");
            let code = if self.style.color { highlight::Code::new(language) } else { None };
            self.block = Block::Fence(Fence { indent: ind, marker, len, code });
            // In colour the fence line gives way to the language, as a dim label (nothing
            // without one); plain, the fence stays as the only sign of the block.
            if !self.style.color {
                write_line(&[Span::new(line, Attr::dim())], &self.style, out);
            } else if !language.is_empty() {
                let label =
                    [Span::new(&line[..ind], Attr::default()), Span::new(language, Attr::dim())];
                write_line(&label, &self.style, out);
            }
            return;
        }
        if may_start_table && rest.starts_with('|') {
            self.block = Block::TableHead(line.to_string());
            return;
        }

        let mut spans = Vec::new();
        let mut rest = line;
        let mut first = true;
        loop {
            let (ind, r) = indent(rest);
            if is_rule(r) {
                break;
            }
            if let Some(quoted) = r.strip_prefix('>') {
                spans.push(Span::new(&format!("{}│ ", " ".repeat(ind)), Attr::dim()));
                rest = quoted.strip_prefix(' ').unwrap_or(quoted);
                first = false;
                continue;
            }
            if let Some((marker, item)) = list_marker(r) {
                let bullet = if marker.len() == 1 && !marker.as_bytes()[0].is_ascii_digit() {
                    let depth = if first { self.list_depth(ind) } else { 0 };
                    BULLETS[depth % BULLETS.len()]
                } else {
                    if first {
                        self.list_depth(ind);
                    }
                    marker
                };
                let attr = Attr { bold: true, fg: Some(palette::YELLOW), ..Attr::default() };
                spans.push(Span::new(&format!("{}{bullet} ", " ".repeat(ind)), attr));
                rest = item;
                first = false;
                if let Some((done, task)) = task_box(rest) {
                    spans.push(Span::new(if done { "☑ " } else { "☐ " }, Attr::default()));
                    rest = task;
                }
                continue;
            }
            if first && ind == 0 {
                self.lists.clear();
            }
            break;
        }

        let (ind, r) = indent(rest);
        let pad = " ".repeat(ind);
        if is_rule(r) {
            let used = spans_width(&spans) + ind;
            let n = self.style.width.min(80).saturating_sub(used).max(3);
            spans.push(Span::new(&format!("{pad}{}", "─".repeat(n)), Attr::dim()));
        } else if let Some((level, text)) = heading(r) {
            let attr = Attr {
                bold: true,
                underline: level == 1,
                fg: (level <= 2).then_some(palette::MAGENTA),
                ..Attr::default()
            };
            let marks = match (self.style.color, text.is_empty()) {
                (true, _) => String::new(),
                (false, true) => "#".repeat(level),
                (false, false) => "#".repeat(level) + " ",
            };
            spans.push(Span::new(&format!("{pad}{marks}"), attr.clone()));
            spans.extend(inline(text, &attr, &self.style));
        } else {
            spans.push(Span::new(&pad, Attr::default()));
            spans.extend(inline(r, &Attr::default(), &self.style));
        }
        write_line(&spans, &self.style, out);
    }

    /// The depth of a list item at this indentation, updating the open levels.
    fn list_depth(&mut self, ind: usize) -> usize {
        while self.lists.last().is_some_and(|&open| open > ind) {
            self.lists.pop();
        }
        if self.lists.last() != Some(&ind) {
            self.lists.push(ind);
        }
        self.lists.len() - 1
    }
}

/// The columns a character takes on every terminal, where they agree: printable ASCII, Latin,
/// Greek, Cyrillic, common punctuation, arrows, maths and box drawing (one column), and the
/// CJK blocks (two). `None` for the rest.
fn settled_width(c: char) -> Option<usize> {
    let one = matches!(c,
        ' '..='~' | '\u{a0}'..='\u{ac}' | '\u{ae}'..='\u{2ff}' | '\u{370}'..='\u{482}'
        | '\u{48a}'..='\u{52f}' | '\u{2010}'..='\u{2027}' | '\u{2030}'..='\u{205e}'
        | '\u{2190}'..='\u{22ff}' | '\u{2500}'..='\u{257f}');
    let two = matches!(c,
        '\u{3000}'..='\u{303e}' | '\u{3041}'..='\u{3096}' | '\u{30a1}'..='\u{30fa}'
        | '\u{4e00}'..='\u{9fff}' | '\u{ac00}'..='\u{d7a3}' | '\u{ff01}'..='\u{ff60}');
    match (one, two, c.width()) {
        (true, _, Some(1)) => Some(1),
        (_, true, Some(2)) => Some(2),
        _ => None,
    }
}

fn indent(line: &str) -> (usize, &str) {
    let rest = line.trim_start_matches(' ');
    (line.len() - rest.len(), rest)
}

/// ```` ``` ```` or `~~~` (three or more) and the info string.
fn fence_open(s: &str) -> Option<(u8, usize, &str)> {
    let marker = *s.as_bytes().first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let len = s.bytes().take_while(|&b| b == marker).count();
    let info = s[len..].trim();
    (len >= 3 && !(marker == b'`' && info.contains('`'))).then_some((marker, len, info))
}

/// `---`, `***`, `___`, spaces allowed between.
fn is_rule(s: &str) -> bool {
    let t = s.trim_end();
    let Some(c) = t.chars().next().filter(|c| matches!(c, '-' | '*' | '_')) else {
        return false;
    };
    t.chars().all(|x| x == c || x == ' ') && t.chars().filter(|&x| x == c).count() >= 3
}

/// A list item's marker (`-`, `*`, `+`, `1.`, `1)`) and the item's text.
fn list_marker(s: &str) -> Option<(&str, &str)> {
    let b = s.as_bytes();
    let len = match b.first()? {
        b'-' | b'*' | b'+' => 1,
        _ => {
            let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
            if !(1..=9).contains(&digits) || !matches!(b.get(digits), Some(b'.' | b')')) {
                return None;
            }
            digits + 1
        }
    };
    match b.get(len) {
        None => Some((s, "")),
        Some(b' ') => Some((&s[..len], &s[len + 1..])),
        Some(_) => None,
    }
}

/// `[ ] ` or `[x] ` starting a list item.
fn task_box(s: &str) -> Option<(bool, &str)> {
    let rest = s.strip_prefix('[')?;
    let done = match rest.as_bytes().first()? {
        b' ' => false,
        b'x' | b'X' => true,
        _ => return None,
    };
    rest[1..].strip_prefix("] ").map(|text| (done, text))
}

/// An ATX heading: its level and text (without a closing run of `#`).
fn heading(s: &str) -> Option<(usize, &str)> {
    let level = s.bytes().take_while(|&b| b == b'#').count();
    let rest = &s[level.min(s.len())..];
    if !(1..=6).contains(&level) || !(rest.is_empty() || rest.starts_with(' ')) {
        return None;
    }
    let text = rest.trim();
    let closed = text.trim_end_matches('#');
    let text = if closed.is_empty() {
        ""
    } else if closed.ends_with(' ') {
        closed.trim_end()
    } else {
        text
    };
    Some((level, text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::borrow::Cow;
    use unicode_width::UnicodeWidthStr;

    const COLOR: Style = Style { color: true, hyperlinks: true, width: 40, live: false };
    const NO_LINKS: Style = Style { hyperlinks: false, ..COLOR };
    const PLAIN: Style = Style { color: false, hyperlinks: false, width: 40, live: false };

    /// Escape codes made visible for snapshots.
    fn visible(text: &str) -> String {
        text.replace('\x1b', "␛")
    }

    /// The same text in colour (escapes shown as ␛) and plain, for one snapshot.
    fn both(text: &str) -> String {
        format!("{}\n---- plain ----\n{}", visible(&render(text, COLOR)), render(text, PLAIN))
    }

    #[test]
    fn headings() {
        insta::assert_snapshot!(both(
            "# Title\n## Section ##\n### Sub *part*\n#### Deep\nNot #a heading\n#nospace\n"
        ));
    }

    #[test]
    fn emphasis_code_and_quotes() {
        insta::assert_snapshot!(both(
            "Some *em*, _em_, **strong**, ***both***, ~~gone~~ and `code` with \\*stars\\*.\n\
             > A quote with **bold**\n> > nested\n\n---\n"
        ));
    }

    #[test]
    fn lists() {
        insta::assert_snapshot!(both(
            "- one\n- two\n  - nested **bold**\n    - deeper\n  - back\n- three\n\n\
             1. first\n2. second\n   continued\n10) tenth\n\n- [ ] todo\n- [x] done\n\
             * star\n+ plus\n-not a list\n"
        ));
    }

    #[test]
    fn tables() {
        insta::assert_snapshot!(both(
            "Before\n| Name | Qty | Note |\n|:---|---:|:---:|\n| apple | 3 | `fresh` |\n\
             | kiwi | 12 | **ripe** |\n| a\\|b | 1 |\nAfter\n"
        ));
    }

    #[test]
    fn a_wide_table_wraps_its_cells_to_the_width() {
        let text = "| key | what it means |\n| --- | --- |\n\
                    | render | when answers are rendered on a terminal, auto always or never |\n";
        let out = render(text, PLAIN);
        insta::assert_snapshot!(out);
        assert!(out.lines().all(|l| l.width() <= PLAIN.width), "{out}");
    }

    #[test]
    fn not_a_table() {
        let text = "| just a pipe\nand text\n";
        assert_eq!(render(text, PLAIN), "| just a pipe\nand text\n");
    }

    #[test]
    fn code() {
        insta::assert_snapshot!(both(
            "```rust\nfn main() {\n    // hi\n    let x = \"s\";\n}\n```\n\
             ~~~\nno *language* here\n~~~\n\n  ```python\n  def f(): return 1\n  ```\n"
        ));
    }

    #[test]
    fn links() {
        let text = "See [the docs](https://example.com/a%20b \"Title\") and <https://example.com>.\n\
                    [ünï](https://example.com/ü) and **[bold link](http://b.c)**\n\
                    ![diagram](x.png) [same](same)\n[ref]: https://example.com\n";
        insta::assert_snapshot!(format!(
            "{}\n---- no hyperlinks ----\n{}\n---- plain ----\n{}",
            visible(&render(text, COLOR)),
            visible(&render(text, NO_LINKS)),
            render(text, PLAIN)
        ));
    }

    #[test]
    fn plain_output_has_no_escape_and_control_characters_are_defused() {
        let text = "# a\x1b[31m red\n`x`\t**y**\r\n| a |\n|---|\n| \x07 |\n```sh\necho \x1b]0;t\x07\n```\n";
        let out = render(text, PLAIN);
        assert!(!out.contains('\x1b') && !out.contains('\x07') && !out.contains('\r'), "{out:?}");
        let colored = render(text, COLOR);
        assert!(!colored.contains("\x1b]0;") && !colored.contains('\x07'), "{colored:?}");
    }

    #[test]
    fn clean_text_shows_every_control_sequence_as_text() {
        let hostile = "a\x1b]52;c;aGk=\x07b\x1b]0;title\x1b\\c\x1b]8;;http://x\x1b\\d\u{9b}2Je\r\n\
                       f\rg\th\n\x08\r";
        assert_eq!(
            clean_text(hostile),
            "a\u{fffd}]52;c;aGk=\u{fffd}b\u{fffd}]0;title\u{fffd}\\c\u{fffd}]8;;http://x\u{fffd}\\d\
             \u{fffd}2Je\nf\u{fffd}g\th\n\u{fffd}\u{fffd}"
        );
        assert!(matches!(clean_text("plain\ttext\n"), Cow::Borrowed(_)));
        // Bidirectional overrides reorder what follows them as shown.
        assert_eq!(
            clean_text("id \u{202e}txt.exe\u{2066}x\u{2069}"),
            "id \u{fffd}txt.exe\u{fffd}x\u{fffd}"
        );
        assert!(matches!(clean_text("שלום \u{200f}hello"), Cow::Borrowed(_)));
    }

    #[test]
    fn an_unfinished_last_line_is_rendered_and_ended() {
        assert_eq!(render("**bold** end", PLAIN), "**bold** end\n");
        assert_eq!(render("| a |\n|---|\n| 1 |", PLAIN), "a\n─\n1\n");
        assert_eq!(render("", PLAIN), "");
    }

    /// Markdown-ish lines, hostile to a line-based renderer.
    fn document() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            Just("# Heading *em*".to_string()),
            Just("- item with `code`".to_string()),
            Just("  - nested [link](http://x.y/z)".to_string()),
            Just("1. ordered".to_string()),
            Just("> quoted **strong**".to_string()),
            Just("```rust".to_string()),
            Just("```".to_string()),
            Just("let s = \"日本語\";\t// tab".to_string()),
            Just("| a | b |".to_string()),
            Just("|---|:-:|".to_string()),
            Just("| 1 | 22 |".to_string()),
            Just("---".to_string()),
            Just(String::new()),
            "[a-z *_`|#>\\-\\[\\]()]{0,60}",
            "[\\PC]{0,30}",
        ];
        (prop::collection::vec(line, 0..24), prop::bool::ANY)
            .prop_map(|(lines, crlf)| lines.join(if crlf { "\r\n" } else { "\n" }))
    }

    /// The text cut at these (char-aligned) points.
    fn chunks(text: &str, cuts: &[usize]) -> Vec<String> {
        let mut points: Vec<usize> = cuts
            .iter()
            .map(|&c| c % (text.len() + 1))
            .filter(|&c| text.is_char_boundary(c))
            .collect();
        points.sort_unstable();
        points.dedup();
        let mut pieces = Vec::new();
        let mut start = 0;
        for p in points.into_iter().chain([text.len()]) {
            pieces.push(text[start..p].to_string());
            start = p;
        }
        pieces
    }

    fn streamed(pieces: &[String], style: Style) -> String {
        let mut out = String::new();
        let mut renderer = Renderer::new(style);
        for piece in pieces {
            renderer.push(piece, &mut out);
        }
        renderer.finish(&mut out);
        out
    }

    /// What a terminal of this width shows after `output`, one string per row.
    fn screen(output: &str, width: usize) -> String {
        let size = |n: usize| std::num::NonZeroU16::new(n as u16).expect("a size");
        let mut terminal = vt100::Parser::new(size(400), size(width), 0);
        terminal.process(output.replace('\n', "\r\n").as_bytes());
        terminal.screen().contents()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn chunking_never_changes_the_output(
            text in document(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
        ) {
            let pieces = chunks(&text, &cuts);
            for style in [PLAIN, COLOR] {
                prop_assert_eq!(streamed(&pieces, style), render(&text, style));
            }
            prop_assert!(!render(&text, PLAIN).contains('\x1b'));
        }

        #[test]
        fn live_redrawing_leaves_the_screen_as_rendering_whole_does(
            text in document(),
            cuts in prop::collection::vec(any::<usize>(), 0..12),
            width in 8usize..50,
        ) {
            let style = Style { width, ..NO_LINKS };
            let live = streamed(&chunks(&text, &cuts), Style { live: true, ..style });
            prop_assert_eq!(screen(&live, width), screen(&render(&text, style), width));
        }
    }

    #[test]
    fn live_shows_the_unfinished_line_at_once_and_redraws_it() {
        let style = Style { live: true, width: 10, ..NO_LINKS };
        let mut renderer = Renderer::new(style);
        let mut out = String::new();
        renderer.push("Some **bo", &mut out);
        assert_eq!(out, "Some **bo");
        out.clear();
        renderer.push("ld** and", &mut out);
        renderer.push(" more\n", &mut out);
        // The raw line took two rows of ten columns: up one, clear, the rendered line.
        assert_eq!(visible(&out), "ld** and\r␛[1A␛[JSome ␛[1mbold␛[0m and more\n");
        out.clear();
        renderer.push("next", &mut out);
        renderer.hide(&mut out);
        assert_eq!(visible(&out), "next\r␛[J");
        out.clear();
        renderer.push("", &mut out);
        renderer.finish(&mut out);
        assert_eq!(visible(&out), "next\r␛[Jnext\n");
        // A character terminals disagree on the width of stops the raw preview.
        let mut out = String::new();
        renderer.push("ok 👍 more", &mut out);
        renderer.push(" and more\n", &mut out);
        assert_eq!(visible(&out), "ok \r␛[Jok 👍 more and more\n");
        // Without colour nothing is shown before its line ends: redrawing takes escapes.
        let mut plain = Renderer::new(Style { live: true, ..PLAIN });
        let mut out = String::new();
        plain.push("partial", &mut out);
        assert_eq!(out, "");
    }
}
