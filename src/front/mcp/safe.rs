//! Text for a model with nothing in it that can drive a terminal. A person's terminal gets
//! `render::clean_text` instead, which shows each control character as `�` so that the reader
//! sees something was there; a model quoting a result is better served by the words alone.

/// Text with nothing that can drive a terminal: escape sequences (CSI, OSC such as the
/// clipboard's `ESC ] 52` or a title's `ESC ] 0`, DCS and the like, in their 7-bit and 8-bit
/// forms) are taken out whole, and the other control characters but newline and tab dropped.
/// A string sequence with no terminator ends at the end of its line, so the rest is kept.
pub(super) fn safe_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' | '\t' => out.push(c),
            '\x1b' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                Some(' '..='/') => {
                    // Intermediate bytes, then the final one.
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next_if(|c| !c.is_control());
                }
                Some('\n') => out.push('\n'),
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars>) {
    while chars.next_if(|c| matches!(c, '0'..='?' | ' '..='/')).is_some() {}
    chars.next_if(|c| matches!(c, '@'..='~'));
}

fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars>) {
    while let Some(&c) = chars.peek() {
        match c {
            '\n' => return,
            '\x07' | '\u{9c}' => {
                chars.next();
                return;
            }
            '\x1b' => {
                chars.next();
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {
                chars.next();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safe_text_takes_out_every_escape_and_keeps_the_words() {
        let cases = [
            ("copy\x1b]52;c;ZXZpbA==\x07 me", "copy me"),
            ("title\x1b]0;owned\x1b\\ here", "title here"),
            ("a \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ b", "a link b"),
            ("\x1b[31mred\x1b[0m \x1b[2J\x1b[?1049h", "red "),
            ("8-bit \u{9b}31mcsi\u{9d}0;t\u{9c} done", "8-bit csi done"),
            ("cr\r\nlf, bell\x07, nul\0, del\x7f", "cr\nlf, bell, nul, del"),
            ("open \x1b]52;c;never ended\nnext line", "open \nnext line"),
            ("\x1b(0line\x1b)B \x1bc end", "line  end"),
            ("tabs\tand ünïcode ✓ stay", "tabs\tand ünïcode ✓ stay"),
        ];
        for (dirty, clean) in cases {
            assert_eq!(safe_text(dirty), clean, "{dirty:?}");
        }
    }
}
