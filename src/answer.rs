//! What an answer's record keeps: the text exactly as it was printed, with a block for each tool
//! call the engine made, where it made it. Pure: decoded outputs in, text out.
//!
//! ```text
//! Let me search for that.
//!
//! > WebSearch: rust 1.89 file locking
//! > - [Rust 1.89 release notes](https://blog.rust-lang.org/2026/08/07/Rust-1.89.0/)
//! > - [File in std::fs](https://doc.rust-lang.org/std/fs/struct.File.html)
//!
//! According to the release notes, ...
//! ```
//!
//! - A block is the call's line, `> NAME: INPUT` (the query, the URL), or `> NAME (refused):
//!   INPUT` / `(failed)` when it gave the model no result, then one `> - [title](url)` line per
//!   source the search returned, where the engine reports them (claude's WebSearch does; gemini
//!   keeps its sources to itself). So the file says where an answer came from even when the
//!   model forgets to cite.
//! - Exactly one blank line separates a block from the text before it, the text after it, and
//!   the next block. The answer's own break between two messages serves as the blank line
//!   before; a block goes in once the text after it starts, after that text's leading newlines.
//! - Blocks and the blank lines around them are only added, never put in place of the answer's
//!   bytes: the record without them is byte for byte what stdout printed (`printed` gives it
//!   back, and a property test holds it to that).
//!
//! The record is replayed as history in later turns, blocks included: the model then sees what
//! it searched for and what it found.

use std::ops::Range;

use crate::engine::{ToolCall, ToolStatus};
use crate::transcript::one_line;

/// Builds the record's text as the outputs of a turn arrive.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    /// Bytes handed out so far.
    len: u64,
    /// Newlines at the end of what was handed out, up to two.
    trailing: usize,
    /// Blocks of tool calls waiting for the text after them.
    waiting: Vec<String>,
    /// What was added to the printed text: the blocks and the blank lines around them.
    added: Vec<Range<u64>>,
}

impl Kept {
    /// The bytes to keep for printed text.
    pub(crate) fn text(&mut self, text: &str) -> String {
        let lead = text.bytes().take_while(|&b| b == b'\n').count();
        if self.waiting.is_empty() || lead == text.len() {
            let mut out = String::new();
            self.printed(text, &mut out);
            return out;
        }
        let mut out = String::new();
        self.printed(&text[..lead], &mut out);
        self.blocks(true, &mut out);
        self.printed(&text[lead..], &mut out);
        out
    }

    /// A tool call: its block waits for the text that follows it.
    pub(crate) fn tool(&mut self, call: &ToolCall) {
        self.waiting.push(tool_block(call));
    }

    /// The bytes to keep at the end of the answer: blocks that no text followed.
    pub(crate) fn finish(&mut self) -> String {
        let mut out = String::new();
        self.blocks(false, &mut out);
        out
    }

    /// The byte ranges of the record that were not printed.
    #[cfg(test)]
    pub(crate) fn added(&self) -> &[Range<u64>] {
        &self.added
    }

    fn printed(&mut self, text: &str, out: &mut String) {
        if text.is_empty() {
            return;
        }
        let newlines = text.bytes().rev().take_while(|&b| b == b'\n').count();
        self.trailing =
            if newlines == text.len() { self.trailing + newlines } else { newlines }.min(2);
        self.len += text.len() as u64;
        out.push_str(text);
    }

    /// The waiting blocks, each after a blank line (none at the very start), and one more
    /// blank line after the last when text follows.
    fn blocks(&mut self, text_follows: bool, out: &mut String) {
        if self.waiting.is_empty() {
            return;
        }
        let start = out.len();
        for block in std::mem::take(&mut self.waiting) {
            if self.len > 0 || out.len() > start {
                let before =
                    if out.len() > start { 1 } else { 2usize.saturating_sub(self.trailing) };
                out.push_str(&"\n".repeat(before));
            }
            out.push_str(&block);
        }
        if text_follows {
            out.push('\n');
        }
        let added = (out.len() - start) as u64;
        self.added.push(self.len..self.len + added);
        self.len += added;
        self.trailing = if text_follows { 2 } else { 1 };
    }
}

/// A tool call as the record keeps it: its line, then a line per source; ends with a newline.
pub(crate) fn tool_block(call: &ToolCall) -> String {
    let mut block = format!("> {}\n", call.line());
    for source in &call.sources {
        let title = match one_line(&source.title, 200) {
            t if t.is_empty() => one_line(&source.url, 200),
            t => t,
        };
        block.push_str(&format!("> - [{}]({})\n", link_text(&title), link_url(&source.url)));
    }
    block
}

/// A part of a kept answer, as it was shown: text, or a tool call read back from its block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shown<'a> {
    Text(&'a str),
    Tool(ToolCall),
}

/// A kept answer in the order it was shown, its tool calls read back from their blocks (for an
/// editor's replay). A block is a paragraph of its own whose first line is a call's line
/// (`> NAME: INPUT`, `> NAME (refused): INPUT`) and whose other lines are sources; anything
/// else is text, passed on exactly.
pub(crate) fn shown(kept: &str) -> Vec<Shown<'_>> {
    let mut parts = Vec::new();
    let mut text_from = 0;
    let mut at = 0;
    let mut blank_before = true;
    while at < kept.len() {
        let end = kept[at..].find('\n').map_or(kept.len(), |n| at + n + 1);
        if blank_before && let Some((call, block_end)) = block_at(kept, at) {
            if text_from < at {
                parts.push(Shown::Text(&kept[text_from..at]));
            }
            parts.push(Shown::Tool(call));
            text_from = block_end;
            at = block_end;
            blank_before = true;
            continue;
        }
        blank_before = kept[at..end].trim_end_matches(['\n', '\r']).is_empty();
        at = end;
    }
    if text_from < kept.len() {
        parts.push(Shown::Text(&kept[text_from..]));
    }
    parts
}

/// The tool call whose block starts at `at`, and where the block ends (past a blank line or
/// the end of the answer).
fn block_at(kept: &str, at: usize) -> Option<(ToolCall, usize)> {
    let mut lines = kept[at..].split_inclusive('\n');
    let first = lines.next()?;
    let (name, status, input) = call_line(first.strip_suffix('\n')?.strip_prefix("> ")?)?;
    let mut end = at + first.len();
    let mut sources = Vec::new();
    for line in lines {
        let Some(source) = line.strip_suffix('\n').and_then(|l| l.strip_prefix("> - [")) else {
            break;
        };
        let (title, url) = source.rsplit_once("](")?;
        let url = url.strip_suffix(')')?;
        let title = title.replace("\\[", "[").replace("\\]", "]").replace("\\\\", "\\");
        sources.push(crate::engine::Source { title, url: url.to_string() });
        end += line.len();
    }
    match kept[end..].split_inclusive('\n').next() {
        None => {}
        Some("\n") => end += 1,
        Some(_) => return None,
    }
    let reason = (status != ToolStatus::Ran).then(|| format!("the tool was {}", status.as_str()));
    Some((ToolCall { name, input, status, reason, sources }, end))
}

/// `NAME: INPUT`, `NAME (refused): INPUT`, `NAME`: a call's line, as [`ToolCall::line`] writes it.
fn call_line(line: &str) -> Option<(String, ToolStatus, String)> {
    let (head, input) = line.split_once(": ").unwrap_or((line, ""));
    let (name, status) = match head.split_once(' ') {
        None => (head, ToolStatus::Ran),
        Some((name, "(refused)")) => (name, ToolStatus::Refused),
        Some((name, "(failed)")) => (name, ToolStatus::Failed),
        Some(_) => return None,
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.';
    let starts = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    // A quote of the answer's own (`> Note: ...`) is not a call: a tool's name is one word
    // that looks like one (`WebSearch`, `google_web_search`), unless its status says it is.
    let tool_like = status != ToolStatus::Ran
        || name.contains('_')
        || name.chars().skip(1).any(|c| c.is_ascii_uppercase());
    (starts && tool_like && name.chars().all(word))
        .then(|| (name.to_string(), status, input.to_string()))
}

/// Markdown link text that shows as it is: brackets and backslashes escaped.
fn link_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\\' | '[' | ']') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A URL that cannot end the link early or break the line: spaces, controls, parentheses and
/// angle brackets percent-encoded, as a browser would send them.
fn link_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    for c in url.trim().chars() {
        match c {
            '(' | ')' | '<' | '>' | ' ' => out.push_str(&format!("%{:02X}", c as u32)),
            c if c.is_control() || c.is_whitespace() => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("%{b:02X}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

/// The printed answer, from the record's text and what [`Kept`] added to it.
#[cfg(test)]
pub(crate) fn printed(kept: &str, added: &[Range<u64>]) -> String {
    let mut out = String::with_capacity(kept.len());
    let mut at = 0usize;
    for range in added {
        let (start, end) = (range.start as usize, range.end as usize);
        if let Some(text) = kept.get(at..start) {
            out.push_str(text);
        }
        at = end.max(at);
    }
    if let Some(text) = kept.get(at..) {
        out.push_str(text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Output, Source, ToolStatus};
    use proptest::prelude::*;

    fn search(query: &str, sources: &[(&str, &str)]) -> ToolCall {
        ToolCall {
            name: "WebSearch".into(),
            input: query.into(),
            status: ToolStatus::Ran,
            reason: None,
            sources: sources
                .iter()
                .map(|(title, url)| Source { title: title.to_string(), url: url.to_string() })
                .collect(),
        }
    }

    fn refused(name: &str, input: &str) -> ToolCall {
        ToolCall {
            name: name.into(),
            input: input.into(),
            status: ToolStatus::Refused,
            reason: Some("No such tool available: Bash".into()),
            sources: Vec::new(),
        }
    }

    /// The record's text and the printed text, for outputs in order.
    fn keep(outputs: &[Output]) -> (String, String) {
        let mut kept = Kept::default();
        let (mut record, mut shown) = (String::new(), String::new());
        for output in outputs {
            match output {
                Output::Text(t) => {
                    record.push_str(&kept.text(t));
                    shown.push_str(t);
                }
                Output::Tool(call) => kept.tool(call),
                _ => {}
            }
        }
        record.push_str(&kept.finish());
        assert_eq!(
            printed(&record, kept.added()),
            shown,
            "the record minus the blocks: {record:?}"
        );
        (record, shown)
    }

    fn text(t: &str) -> Output {
        Output::Text(t.into())
    }

    #[test]
    fn a_kept_answer_reads_back_as_its_text_and_tool_calls_in_order() {
        let sources =
            [("Guide [v2]", "https://guide.example.org/a"), ("Notes", "https://n.example/b")];
        let (first, second) = (search("rust 1.89", &sources), refused("Bash", "ls -la"));
        let (record, _) = keep(&[
            text("Let me search."),
            Output::Tool(first.clone()),
            text("\n\nThen:"),
            Output::Tool(second.clone()),
            text("\n\n> A quote: of my own\nand text.\n\n> Note: not a call\n"),
        ]);
        let parts = shown(&record);
        let tools: Vec<(String, Vec<crate::engine::Source>)> = parts
            .iter()
            .filter_map(|p| match p {
                Shown::Tool(t) => Some((t.line(), t.sources.clone())),
                Shown::Text(_) => None,
            })
            .collect();
        assert_eq!(tools, [(first.line(), first.sources), (second.line(), second.sources)]);
        let texts: String = parts
            .iter()
            .filter_map(|p| if let Shown::Text(t) = p { Some(*t) } else { None })
            .collect();
        assert!(texts.starts_with("Let me search.") && texts.contains("Then:"), "{parts:?}");
        assert!(
            texts.ends_with("> A quote: of my own\nand text.\n\n> Note: not a call\n"),
            "{parts:?}"
        );
    }

    #[test]
    fn a_block_sits_between_the_messages_with_one_blank_line_each_side() {
        let sources = [("Guide", "https://guide.example.org/a"), ("Notes", "https://n.example/b")];
        let (record, shown) = keep(&[
            text("Let me search."),
            Output::Tool(search("rust 1.89", &sources)),
            text("\n\n"),
            text("According to it, yes."),
        ]);
        assert_eq!(shown, "Let me search.\n\nAccording to it, yes.");
        assert_eq!(
            record,
            "Let me search.\n\n> WebSearch: rust 1.89\n> - [Guide](https://guide.example.org/a)\n\
             > - [Notes](https://n.example/b)\n\nAccording to it, yes."
        );
    }

    #[test]
    fn blocks_first_last_and_in_a_row() {
        let (record, _) = keep(&[
            Output::Tool(search("one", &[])),
            Output::Tool(refused("Bash", "ls -la")),
            text("Done."),
        ]);
        assert_eq!(record, "> WebSearch: one\n\n> Bash (refused): ls -la\n\nDone.");
        let (record, _) = keep(&[text("Text.\n"), Output::Tool(search("two", &[]))]);
        assert_eq!(record, "Text.\n\n> WebSearch: two\n");
        let (record, _) = keep(&[Output::Tool(search("alone", &[]))]);
        assert_eq!(record, "> WebSearch: alone\n");
    }

    #[test]
    fn no_run_of_blank_lines_around_a_block() {
        // The break already ends in a blank line, or the text brings its own newline.
        for outputs in [
            vec![text("a\n\n"), Output::Tool(search("q", &[])), text("b")],
            vec![text("a\n"), Output::Tool(search("q", &[])), text("\n"), text("b")],
            vec![text("a"), Output::Tool(search("q", &[])), text("\n\nb")],
        ] {
            let (record, _) = keep(&outputs);
            assert_eq!(record, "a\n\n> WebSearch: q\n\nb", "{outputs:?}");
        }
    }

    #[test]
    fn sources_are_links_that_stay_on_their_line() {
        let call = search(
            "q",
            &[("a [b] \\ c\nd", "https://x.example/p (1)\n<z>"), ("", "https://y.example/")],
        );
        assert_eq!(
            tool_block(&call),
            "> WebSearch: q\n> - [a \\[b\\] \\\\ c d](https://x.example/p%20%281%29%0A%3Cz%3E)\n\
             > - [https://y.example/](https://y.example/)\n"
        );
    }

    proptest! {
        #[test]
        fn the_record_minus_blocks_is_what_was_printed(
            pieces in proptest::collection::vec(
                prop_oneof![
                    "[a-z\\n]{0,6}".prop_map(Output::Text),
                    "[a-z ]{0,8}".prop_map(|q| Output::Tool(search(&q, &[("t", "https://u.example/")]))),
                ],
                0..12,
            )
        ) {
            let (record, _) = keep(&pieces);
            // A block's own line is never followed by a run of blank lines.
            let tools = pieces.iter().filter(|p| matches!(p, Output::Tool(_))).count();
            prop_assert_eq!(record.matches("> WebSearch").count(), tools);
            for (at, _) in record.match_indices("> - [t](https://u.example/)\n") {
                let after = &record[at + "> - [t](https://u.example/)\n".len()..];
                prop_assert!(!after.starts_with("\n\n"), "{:?}", record);
            }
        }
    }
}
