//! Text from a transcript or an engine made safe to show on a terminal: control characters that
//! could start an escape sequence are shown as U+FFFD, whether the text is rendered or not.

use std::borrow::Cow;

use unicode_width::UnicodeWidthChar;

use super::TAB;

/// The one rule for text from a transcript (or an engine) that cca shows on a terminal: a
/// control character other than newline and tab, which could start an escape sequence
/// (ESC ] 52 writes the clipboard, ESC ] 0 the window title, ESC ] 8 hides a link, CSI moves
/// the cursor or clears the screen; C1 controls such as U+009B too), or that reorders the line
/// ([`moves_the_terminal`]), is shown as U+FFFD; a
/// carriage return is one only before a newline (CRLF), and is then dropped. Rendering applies
/// it to every line; what is shown without rendering goes through [`clean_text`]; one-line
/// titles are flattened by `transcript::one_line`, control characters becoming spaces.
/// Output that is not a terminal is never cleaned: piped, it is the exact text.
fn harmless(c: char) -> bool {
    !moves_the_terminal(c) || c == '\n' || c == '\t'
}

/// Whether a character changes how a terminal shows what follows it: a control character (an
/// escape sequence starts with one), or one of Unicode's bidirectional embeddings, overrides
/// and isolates (U+202A to U+202E, U+2066 to U+2069), which reorder the rest of the line as
/// shown: a title could pass for another, or a column of ids read backwards.
pub fn moves_the_terminal(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text cleaned by `harmless`'s rule, whole lines or not. A carriage return at the very end is
/// taken as alone: a caller that cuts text into pieces keeps one that ends a piece for the next.
pub fn clean_text(text: &str) -> Cow<'_, str> {
    if text.chars().all(harmless) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            c if harmless(c) => out.push(c),
            _ => out.push('\u{fffd}'),
        }
    }
    Cow::Owned(out)
}

/// A name or id read from a file (a session id, a version), as a line of cca's shows it: as it
/// is when plain (letters, digits, `-`, `_`, `.`), else cleaned by [`clean_text`] and quoted,
/// so that nothing in it can start an escape sequence, pass for a column (a tab) or a line of
/// cca's own (a newline), or hide where it ends (spaces, nothing at all).
pub fn shown_id(id: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_alphanumeric() || matches!(c, '-' | '_' | '.');
    if !id.is_empty() && id.chars().all(plain) {
        return Cow::Borrowed(id);
    }
    Cow::Owned(format!("{:?}", clean_text(id)))
}

/// A line (without its newline) cleaned by [`harmless`]'s rule, with tabs expanded, so that
/// nothing in it can move the cursor and every column is counted.
pub(super) fn clean(line: &str) -> Cow<'_, str> {
    if !line.chars().any(moves_the_terminal) {
        return Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len() + 8);
    let mut col = 0;
    for c in line.chars() {
        if c == '\t' {
            let n = TAB - col % TAB;
            out.extend(std::iter::repeat_n(' ', n));
            col += n;
        } else if !harmless(c) {
            out.push('\u{fffd}');
            col += 1;
        } else {
            out.push(c);
            col += c.width().unwrap_or(0);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_are_not_plain_are_cleaned_and_quoted() {
        assert_eq!(shown_id("0199-a_b.c"), "0199-a_b.c");
        assert_eq!(shown_id(""), "\"\"");
        assert_eq!(shown_id("a b"), "\"a b\"");
        assert_eq!(shown_id("x\u{1b}]52;c;aGk=\u{7}"), "\"x\u{fffd}]52;c;aGk=\u{fffd}\"");
        assert_eq!(shown_id("a\tb\nc\"d"), "\"a\\tb\\nc\\\"d\"");
    }
}
