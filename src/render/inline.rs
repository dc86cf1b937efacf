//! Spans of styled text: a line's inline markdown (emphasis, code, links) parsed into spans,
//! spans wrapped to a width, and spans written out with escape codes or as their plain text.

use std::fmt::Write as _;

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use super::{Style, palette};

/// A run of text with one look.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Span {
    pub(super) text: String,
    pub(super) attr: Attr,
}

impl Span {
    pub(super) fn new(text: &str, attr: Attr) -> Span {
        Span { text: text.to_string(), attr }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Attr {
    pub(super) bold: bool,
    pub(super) dim: bool,
    pub(super) italic: bool,
    pub(super) underline: bool,
    pub(super) strike: bool,
    /// A colour of the terminal's palette, 0-7.
    pub(super) fg: Option<u8>,
    pub(super) link: Option<String>,
}

impl Attr {
    pub(super) fn dim() -> Attr {
        Attr { dim: true, ..Attr::default() }
    }

    /// SGR parameters, `1;35`; empty for the terminal's default look.
    fn sgr(&self) -> String {
        let mut p = String::new();
        for (on, code) in [
            (self.bold, "1"),
            (self.dim, "2"),
            (self.italic, "3"),
            (self.underline, "4"),
            (self.strike, "9"),
        ] {
            if on {
                p.push_str(if p.is_empty() { "" } else { ";" });
                p.push_str(code);
            }
        }
        if let Some(c) = self.fg {
            let _ = write!(p, "{}3{}", if p.is_empty() { "" } else { ";" }, c.min(7));
        }
        p
    }
}

pub(super) fn spans_width(spans: &[Span]) -> usize {
    spans.iter().map(|s| s.text.width()).sum()
}

/// Appends the spans and a newline: styled with escape codes, or their text alone.
pub(super) fn write_line(spans: &[Span], style: &Style, out: &mut String) {
    if !style.color {
        for s in spans {
            out.push_str(&s.text);
        }
        out.push('\n');
        return;
    }
    let mut sgr = String::new();
    let mut link: Option<&str> = None;
    for s in spans.iter().filter(|s| !s.text.is_empty()) {
        let want = if style.hyperlinks { s.attr.link.as_deref() } else { None };
        if want != link {
            if link.is_some() {
                out.push_str("\x1b]8;;\x1b\\");
            }
            if let Some(url) = want {
                out.push_str("\x1b]8;;");
                push_uri(url, out);
                out.push_str("\x1b\\");
            }
            link = want;
        }
        let params = s.attr.sgr();
        if params != sgr {
            if !sgr.is_empty() {
                out.push_str("\x1b[0m");
            }
            if !params.is_empty() {
                let _ = write!(out, "\x1b[{params}m");
            }
            sgr = params;
        }
        out.push_str(&s.text);
    }
    if link.is_some() {
        out.push_str("\x1b]8;;\x1b\\");
    }
    if !sgr.is_empty() {
        out.push_str("\x1b[0m");
    }
    out.push('\n');
}

/// A URL as OSC 8 takes it: printable ASCII, the rest percent-encoded.
fn push_uri(url: &str, out: &mut String) {
    for b in url.bytes() {
        if (0x21..0x7f).contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
}

/// A line's inline markdown (emphasis, code, links) as spans on top of `base`.
pub(super) fn inline(text: &str, base: &Attr, style: &Style) -> Vec<Span> {
    struct Open {
        attr: Attr,
        marker: String,
        url: Option<String>,
        autolink: bool,
        first_span: usize,
    }
    let color = style.color;
    let hyperlinks = color && style.hyperlinks;
    let mut spans: Vec<Span> = Vec::new();
    let mut attr = base.clone();
    let mut open: Vec<Open> = Vec::new();
    let parser = Parser::new_ext(text, Options::ENABLE_STRIKETHROUGH).into_offset_iter();
    for (event, range) in parser {
        match event {
            Event::Start(Tag::Paragraph) | Event::End(TagEnd::Paragraph) => {}
            Event::Start(tag @ (Tag::Emphasis | Tag::Strong | Tag::Strikethrough)) => {
                let source = &text[range.start..];
                let marker = match tag {
                    Tag::Strikethrough => source.chars().take_while(|&c| c == '~').collect(),
                    Tag::Strong => source.chars().take(2).collect(),
                    _ => source.chars().take(1).collect(),
                };
                open.push(Open {
                    attr: attr.clone(),
                    marker,
                    url: None,
                    autolink: false,
                    first_span: spans.len(),
                });
                match tag {
                    Tag::Emphasis => attr.italic = true,
                    Tag::Strong => attr.bold = true,
                    _ => attr.strike = true,
                }
                if !color {
                    spans.push(Span::new(&open[open.len() - 1].marker, attr.clone()));
                }
            }
            Event::End(TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough) => {
                if let Some(o) = open.pop() {
                    if !color {
                        spans.push(Span::new(&o.marker, attr.clone()));
                    }
                    attr = o.attr;
                }
            }
            Event::Start(tag @ (Tag::Link { .. } | Tag::Image { .. })) => {
                let (Tag::Link { link_type, dest_url, .. }
                | Tag::Image { link_type, dest_url, .. }) = &tag
                else {
                    continue;
                };
                open.push(Open {
                    attr: attr.clone(),
                    marker: String::new(),
                    url: Some(dest_url.to_string()),
                    autolink: matches!(link_type, LinkType::Autolink | LinkType::Email),
                    first_span: spans.len(),
                });
                attr.underline = true;
                attr.fg = Some(palette::BLUE);
                attr.link = Some(dest_url.to_string());
                if matches!(tag, Tag::Image { .. }) {
                    spans.push(Span::new("image: ", attr.clone()));
                }
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                let Some(o) = open.pop() else { continue };
                attr = o.attr;
                let url = o.url.unwrap_or_default();
                let shown: String = spans[o.first_span..].iter().map(|s| s.text.as_str()).collect();
                if !hyperlinks && !o.autolink && shown != url && !url.is_empty() {
                    let look = if color { Attr::dim() } else { attr.clone() };
                    spans.push(Span::new(&format!(" ({url})"), look));
                }
            }
            Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => {
                spans.push(Span { text: t.into_string(), attr: attr.clone() });
            }
            Event::Code(code) => {
                if color {
                    let look = Attr { fg: Some(palette::CYAN), ..attr.clone() };
                    spans.push(Span { text: code.into_string(), attr: look });
                } else {
                    spans.push(Span::new(&text[range], attr.clone()));
                }
            }
            Event::SoftBreak | Event::HardBreak => spans.push(Span::new(" ", attr.clone())),
            // Block structure is read line by line above; one that reaches here (a link
            // definition, an HTML block) is shown as it is written.
            Event::Start(_) => return vec![Span::new(text, base.clone())],
            _ => {}
        }
    }
    if spans.is_empty() && !text.trim().is_empty() {
        return vec![Span::new(text, base.clone())];
    }
    spans
}

/// Spans broken into lines of at most `width` columns, at spaces where it can.
pub(super) fn wrap(spans: &[Span], width: usize) -> Vec<Vec<Span>> {
    if spans_width(spans) <= width {
        return vec![spans.to_vec()];
    }
    let chars: Vec<(char, usize)> =
        spans.iter().enumerate().flat_map(|(i, s)| s.text.chars().map(move |c| (c, i))).collect();
    let mut lines: Vec<Vec<(char, usize)>> = vec![Vec::new()];
    let mut used = 0;
    for word in chars.split(|&(c, _)| c == ' ').filter(|w| !w.is_empty()) {
        let w: usize = word.iter().map(|&(c, _)| c.width().unwrap_or(0)).sum();
        let line = lines.last_mut().expect("one line at least");
        if used > 0 && used + 1 + w <= width {
            line.push((' ', word[0].1));
            line.extend_from_slice(word);
            used += 1 + w;
            continue;
        }
        if used > 0 {
            lines.push(Vec::new());
            used = 0;
        }
        for &(c, i) in word {
            let cw = c.width().unwrap_or(0);
            if used > 0 && used + cw > width {
                lines.push(Vec::new());
                used = 0;
            }
            lines.last_mut().expect("one line at least").push((c, i));
            used += cw;
        }
    }
    lines
        .into_iter()
        .map(|line| {
            let mut out: Vec<Span> = Vec::new();
            for (c, i) in line {
                match out.last_mut() {
                    Some(last) if last.attr == spans[i].attr => last.text.push(c),
                    _ => out.push(Span { text: c.to_string(), attr: spans[i].attr.clone() }),
                }
            }
            out
        })
        .collect()
}
