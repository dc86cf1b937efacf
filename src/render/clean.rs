//! Text from a transcript or an engine made safe to show on a terminal: control characters that
//! could start an escape sequence are shown as U+FFFD, whether the text is rendered or not.

use std::borrow::Cow;

use unicode_width::UnicodeWidthChar;

use super::TAB;

/// The one rule for text from a transcript (or an engine) that cca shows on a terminal: a
/// control character other than newline and tab, which could start an escape sequence
/// (ESC ] 52 writes the clipboard, ESC ] 0 the window title, ESC ] 8 hides a link, CSI moves
/// the cursor or clears the screen; C1 controls such as U+009B too), is shown as U+FFFD; a
/// carriage return is one only before a newline (CRLF), and is then dropped. Rendering applies
/// it to every line; what is shown without rendering goes through [`clean_text`]; one-line
/// titles are flattened by `transcript::one_line`, control characters becoming spaces.
/// Output that is not a terminal is never cleaned: piped, it is the exact text.
fn harmless(c: char) -> bool {
    !c.is_control() || c == '\n' || c == '\t'
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

/// A line (without its newline) cleaned by [`harmless`]'s rule, with tabs expanded, so that
/// nothing in it can move the cursor and every column is counted.
pub(super) fn clean(line: &str) -> Cow<'_, str> {
    if !line.chars().any(char::is_control) {
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
