//! The unit recall finds: one exchange of a session (the question with its attachments, and the
//! answer with its tool lines and sources), read out of a transcript's bytes.
//!
//! Pure: bytes in, exchanges out. Numbered as `cca show` numbers them: an exchange is a
//! question followed by a complete answer. A failed or interrupted attempt, and a question
//! still being answered, are found too, under the number the exchange they try for will have
//! (with what partial answer there is). Clears and compactions leave the exchanges before
//! them as they were: still findable.

use std::ops::Range;

use crate::transcript::{Event, Header, Kind, NotTranscript, Scanner, unescape};

/// One exchange, as indexed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Exchange {
    /// 1-based, as `cca show` and `cca grep` number it.
    pub number: u64,
    /// When the answer was recorded (else the question).
    pub at: Option<String>,
    /// The question and what was attached to it.
    pub question: String,
    pub answer: String,
    /// Whether the answer is one (not a failed or interrupted attempt's partial answer, nor
    /// none yet).
    pub answered: bool,
    /// Where the exchange is in the file, from the question's marker to the answer's end.
    pub span: Range<u64>,
}

/// The header and every exchange of a transcript.
pub(crate) fn exchanges(bytes: &[u8]) -> Result<(Header, Vec<Exchange>), NotTranscript> {
    exchanges_numbered(bytes, |_| true)
}

/// The header and the exchanges of a transcript whose numbers are `wanted`: the text of the
/// others is never unescaped (for a search's excerpts, most of the work of reading a session).
pub(crate) fn exchanges_numbered(
    bytes: &[u8],
    wanted: impl Fn(u64) -> bool,
) -> Result<(Header, Vec<Exchange>), NotTranscript> {
    // A line saved in another encoding keeps a turn from going on in the file (its fix is
    // said there), but not its exchanges from being found, as `cca grep` finds them: each byte
    // that is not UTF-8 is read as `?`, which keeps every offset where it was.
    let mended;
    let bytes = match std::str::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(_) => {
            mended = question_marks_for_bad_bytes(bytes);
            mended.as_slice()
        }
    };
    let mut header = None;
    let mut found = Vec::new();
    // Complete exchanges so far: what numbers the next one.
    let mut complete = 0;
    // The question being answered: its text so far, its time and where it starts.
    let mut asking: Option<(String, Option<String>, u64)> = None;
    let content = |range: &Range<u64>| {
        let raw = bytes.get(range.start as usize..range.end as usize).unwrap_or_default();
        unescape(&String::from_utf8_lossy(raw))
    };
    let scanned = Scanner::scan(bytes, |event| match event {
        Event::Header(h, _) => header = Some(h),
        Event::Record(span) => match span.kind {
            Kind::User => {
                // A question that got no answer before the next (a hand edit, a damaged file)
                // is kept, as an attempt under the next one's number.
                if let Some((question, at, start)) = asking.take()
                    && wanted(complete + 1)
                {
                    found.push(Exchange {
                        number: complete + 1,
                        at,
                        question,
                        answer: String::new(),
                        answered: false,
                        span: start..span.raw.start,
                    });
                }
                let question = match wanted(complete + 1) {
                    true => content(&span.content),
                    false => String::new(),
                };
                asking = Some((question, span.meta.at, span.raw.start));
            }
            Kind::Attachment => {
                if let Some((question, _, _)) = &mut asking
                    && wanted(complete + 1)
                {
                    question.push('\n');
                    question.push_str(&content(&span.content));
                }
            }
            Kind::Assistant | Kind::Failed | Kind::Interrupted => {
                if let Some((question, asked_at, start)) = asking.take() {
                    if wanted(complete + 1) {
                        found.push(Exchange {
                            number: complete + 1,
                            at: span.meta.at.or(asked_at),
                            question,
                            answer: content(&span.content),
                            answered: span.kind == Kind::Assistant,
                            span: start..span.raw.end,
                        });
                    }
                    complete += u64::from(span.kind == Kind::Assistant);
                }
            }
            Kind::Clear | Kind::Compaction => {}
        },
        Event::Problem(_) | Event::PartlyRead(_) | Event::Note { .. } => {}
    });
    // Reading from memory cannot fail.
    scanned.unwrap_or(Ok(()))?;
    // A question still being answered (or whose answer a crash cut off).
    if let Some((question, at, start)) = asking.filter(|_| wanted(complete + 1)) {
        let end = bytes.len() as u64;
        found.push(Exchange {
            number: complete + 1,
            at,
            question,
            answer: String::new(),
            answered: false,
            span: start..end,
        });
    }
    match header {
        Some(header) => Ok((header, found)),
        None => Err(NotTranscript {
            line: 1,
            message: "no header".into(),
            not_utf8: false,
            newer: false,
        }),
    }
}

/// `bytes` with each byte of what is not UTF-8 put as `?`: the same length, UTF-8 throughout.
fn question_marks_for_bad_bytes(bytes: &[u8]) -> Vec<u8> {
    let mut mended = Vec::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(_) => {
                mended.extend_from_slice(rest);
                return mended;
            }
            Err(e) => {
                let (good, after) = rest.split_at(e.valid_up_to());
                let bad = e.error_len().unwrap_or(after.len());
                mended.extend_from_slice(good);
                mended.extend(std::iter::repeat_n(b'?', bad));
                rest = &after[bad..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::testing::{header, record};
    use crate::transcript::{Transcript, render};

    #[test]
    fn exchanges_are_numbered_as_show_numbers_them_with_attempts_under_the_next_number() {
        let text = render(&Transcript {
            header: header("t"),
            records: vec![
                record(Kind::User, "first?"),
                record(Kind::Attachment, "attached"),
                record(Kind::Assistant, "one"),
                record(Kind::User, "failed?"),
                record(Kind::Failed, "partial"),
                record(Kind::Clear, ""),
                record(Kind::User, "second?"),
                record(Kind::Assistant, "two\n<!-- cca:end -->"),
                record(Kind::User, "unanswered?"),
                record(Kind::User, "pending?"),
            ],
        });
        let (_, found) = exchanges(text.as_bytes()).unwrap();
        let got: Vec<_> =
            found.iter().map(|e| (e.number, e.question.as_str(), e.answer.as_str())).collect();
        let answered: Vec<bool> = found.iter().map(|e| e.answered).collect();
        assert_eq!(answered, [true, false, true, false, false]);
        assert_eq!(
            got,
            [
                (1, "first?\nattached", "one"),
                (2, "failed?", "partial"),
                (2, "second?", "two\n<!-- cca:end -->"),
                (3, "unanswered?", ""),
                (3, "pending?", ""),
            ]
        );
        let (_, second) = exchanges_numbered(text.as_bytes(), |n| n == 2).unwrap();
        assert_eq!(second, found[1..3], "the exchanges of the numbers wanted, as they are");
        let first = &text[found[0].span.start as usize..found[0].span.end as usize];
        assert!(first.starts_with("<!-- cca:user") && first.ends_with("<!-- cca:end -->\n"));
    }
}
