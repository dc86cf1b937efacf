//! The live context and the summary of a transcript: what the engine is sent (the latest
//! summary and the exchanges after the last clear), counts and problems, folded from the
//! scanner's events; and checkpoints, from which reading can start part-way through a file.

use std::io::{self, BufRead};
use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::scan::{Event, NotTranscript, Position, Problem, RecordSpan, ScanEnd, Scanner};
use super::totals::Totals;
use super::{Header, Kind};

/// Named attachments of a turn, by where their content sits in the file.
pub type Attachments = Vec<(String, Range<u64>)>;

/// One complete exchange, by where its parts sit in the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExchangeSpans {
    pub number: u64,
    pub user: Range<u64>,
    pub attachments: Attachments,
    pub assistant: Range<u64>,
}

/// What the engine sees of a session: the latest summary, if any, and the exchanges after it,
/// since the last clear. Failed and interrupted attempts never appear here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Live {
    pub summary: Option<Range<u64>>,
    /// The first and last exchange the summary stands for.
    pub summary_turns: Option<(u64, u64)>,
    pub exchanges: Vec<ExchangeSpans>,
}

impl Live {
    /// Stored bytes of the live context (content only, before framing).
    pub fn bytes(&self) -> u64 {
        let len = |r: &Range<u64>| r.end - r.start;
        self.summary.as_ref().map_or(0, len)
            + self
                .exchanges
                .iter()
                .map(|e| {
                    len(&e.user)
                        + len(&e.assistant)
                        + e.attachments.iter().map(|(_, r)| len(r)).sum::<u64>()
                })
                .sum::<u64>()
    }
}

/// A summary of a whole scan: the header, the live context, counts, and the problems met.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub header: Header,
    /// Offset just past the header, where records begin.
    pub header_end: u64,
    /// Shared, not copied, with what is sent: a long session has many exchanges.
    pub live: std::sync::Arc<Live>,
    /// Complete exchanges in the file, live or not.
    pub exchanges: u64,
    pub problems: Vec<Problem>,
    /// The last `at` of any record, or the header's creation time.
    pub last_activity: String,
    /// The question of the attempt the file ends inside without an outcome yet, if one (its
    /// content, as stored).
    pub pending_question: Option<Range<u64>>,
    /// What every answer in the file cost, as reported.
    pub totals: Totals,
    /// What reading on over records appended to this file needs (see [`read_on`]); `None` when
    /// the file does not end cleanly between records.
    end: Option<Box<Tail>>,
}

/// The end of a scan, in the form [`read_on`] takes up again.
#[derive(Debug, Clone, PartialEq)]
struct Tail {
    at: Position,
    last_activity: Option<String>,
    pending: Option<(Range<u64>, Attachments)>,
}

/// Everything the summary of a transcript depends on at one point between records: reading can
/// start there, with this, and end with the summary a read of the whole file gives.
///
/// One is taken just after each clear and each compaction (where the live context starts
/// again), when what it holds is small; the store keeps the latest, so that a turn reads only
/// the live context. A checkpoint says nothing about whether the bytes before it are still
/// those it was taken from: that is for whoever keeps it to prove.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Where reading goes on.
    pub at: Position,
    /// The clear or compaction record that ends at `at`.
    pub record: Range<u64>,
    header: Header,
    header_end: u64,
    live: Live,
    exchanges: u64,
    problems: Vec<Problem>,
    last_activity: Option<String>,
    pending: Option<(Range<u64>, Attachments)>,
    #[serde(default)]
    totals: Totals,
}

/// A checkpoint holds at most this many exchanges and problems together: one that holds more
/// is not worth keeping (reading is then as cheap as loading it).
const CHECKPOINT_ITEMS: usize = 256;

/// What a scan found: the summary, and the latest checkpoint (or the one reading started from).
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub summary: Summary,
    pub checkpoint: Option<Checkpoint>,
}

/// Folds scanner events into a [`Summary`].
#[derive(Default)]
pub struct Summarizer {
    header: Option<Header>,
    header_end: u64,
    live: Live,
    exchanges: u64,
    /// Offsets just past each complete exchange, for forks; kept only when asked for.
    exchange_ends: Option<Vec<u64>>,
    problems: Vec<Problem>,
    last_activity: Option<String>,
    pending: Option<(Range<u64>, Attachments)>,
    checkpoint: Option<Checkpoint>,
    totals: Totals,
}

impl Summarizer {
    /// A summarizer that goes on from a checkpoint.
    pub fn resume(from: &Checkpoint) -> Summarizer {
        Summarizer {
            header: Some(from.header.clone()),
            header_end: from.header_end,
            live: from.live.clone(),
            exchanges: from.exchanges,
            exchange_ends: None,
            problems: from.problems.clone(),
            last_activity: from.last_activity.clone(),
            pending: from.pending.clone(),
            checkpoint: Some(from.clone()),
            totals: from.totals,
        }
    }

    pub fn event(&mut self, event: Event) {
        match event {
            Event::Header(h, end) => {
                self.header = Some(h);
                self.header_end = end;
            }
            Event::Problem(p) => {
                self.pending = None;
                self.problems.push(p);
            }
            // A note between records is for people; it does not change the conversation.
            Event::PartlyRead(p) => self.problems.push(p),
            Event::Note { .. } => {}
            Event::Record(r) => {
                if let Some(at) = &r.meta.at {
                    self.last_activity = Some(at.clone());
                }
                match r.kind {
                    Kind::User => self.pending = Some((r.content, Vec::new())),
                    Kind::Attachment => {
                        if let Some((_, attachments)) = &mut self.pending {
                            let name = r.meta.name.clone().unwrap_or_else(|| "context".into());
                            attachments.push((name, r.content));
                        }
                    }
                    Kind::Assistant => {
                        let m = &r.meta;
                        self.totals = self.totals.add(m.input_tokens, m.output_tokens, m.cost_usd);
                        if let Some((user, attachments)) = self.pending.take() {
                            self.exchanges += 1;
                            if let Some(ends) = &mut self.exchange_ends {
                                ends.push(r.raw.end);
                            }
                            self.live.exchanges.push(ExchangeSpans {
                                number: self.exchanges,
                                user,
                                attachments,
                                assistant: r.content,
                            });
                        }
                    }
                    Kind::Failed | Kind::Interrupted => self.pending = None,
                    Kind::Clear => {
                        self.pending = None;
                        self.live = Live::default();
                        self.take_checkpoint(&r);
                    }
                    Kind::Compaction => {
                        let through = r.meta.through.unwrap_or(0);
                        self.live.exchanges.retain(|e| e.number > through);
                        self.live.summary = Some(r.content.clone());
                        self.live.summary_turns = Some((r.meta.first.unwrap_or(1), through));
                        self.take_checkpoint(&r);
                    }
                }
            }
        }
    }

    /// Keeps the state just after `r` as the latest checkpoint, when it is small (an earlier
    /// one stays good to start from otherwise).
    fn take_checkpoint(&mut self, r: &RecordSpan) {
        let pending = self.pending.as_ref().map_or(0, |(_, a)| 1 + a.len());
        let items = self.live.exchanges.len() + self.problems.len() + pending;
        let Some(header) = self.header.as_ref().filter(|_| items <= CHECKPOINT_ITEMS) else {
            return;
        };
        self.checkpoint = Some(Checkpoint {
            at: Position { offset: r.raw.end, line: r.end_line },
            record: r.raw.clone(),
            header: header.clone(),
            header_end: self.header_end,
            live: self.live.clone(),
            exchanges: self.exchanges,
            problems: self.problems.clone(),
            last_activity: self.last_activity.clone(),
            pending: self.pending.clone(),
            totals: self.totals,
        });
    }

    /// The summary once every event is in; `end` is how the scan ended.
    pub fn finish(self, end: ScanEnd) -> Scan {
        let header = self.header.expect("finish is called after a successful scan");
        // A fork's records keep their times from its parent: its own activity starts when it
        // was created, so it lists (and counts for `latest`) as the new session it is.
        let last_activity = match &self.last_activity {
            Some(at) if later(at, &header.created) => at.clone(),
            _ => header.created.clone(),
        };
        let tail = end.resume.map(|at| {
            Box::new(Tail { at, last_activity: self.last_activity, pending: self.pending.clone() })
        });
        let mut live = self.live;
        live.exchanges.shrink_to_fit();
        // A record whose end marker is the file's last line, without a newline, ends past the
        // bytes read: reading cannot start again there.
        let checkpoint = self.checkpoint.filter(|c| c.at.offset <= end.offset);
        let summary = Summary {
            header,
            header_end: self.header_end,
            live: std::sync::Arc::new(live),
            exchanges: self.exchanges,
            problems: self.problems,
            last_activity,
            pending_question: self.pending.as_ref().map(|(question, _)| question.clone()),
            totals: self.totals,
            end: tail,
        };
        Scan { summary, checkpoint }
    }
}

/// Scans a transcript into its [`Summary`].
pub fn summarize(reader: impl BufRead) -> io::Result<Result<Summary, NotTranscript>> {
    Ok(scan(reader, None)?.map(|s| s.summary))
}

/// Scans a transcript into its [`Summary`] and its latest [`Checkpoint`]: the whole of it, or,
/// with `from`, only what comes after that checkpoint (the reader must start there).
pub fn scan(
    reader: impl BufRead,
    from: Option<&Checkpoint>,
) -> io::Result<Result<Scan, NotTranscript>> {
    let mut summarizer = from.map_or_else(Summarizer::default, Summarizer::resume);
    let end = Scanner::scan_from(reader, from.map(|c| c.at), |e| summarizer.event(e))?;
    Ok(end.map(|end| summarizer.finish(end)))
}

/// Scans a whole transcript into its [`Summary`] and the offset just past each complete
/// exchange, in order (where a fork at that exchange ends).
pub fn exchange_ends(
    reader: impl BufRead,
) -> io::Result<Result<(Summary, Vec<u64>), NotTranscript>> {
    let mut summarizer = Summarizer { exchange_ends: Some(Vec::new()), ..Summarizer::default() };
    let end = Scanner::scan_from(reader, None, |e| summarizer.event(e))?;
    Ok(end.map(|end| {
        let ends = summarizer.exchange_ends.take().unwrap_or_default();
        (summarizer.finish(end).summary, ends)
    }))
}

/// Reads on from the end of the file `summary` was read from, through `appended`: the records
/// written after it, starting at offset `at`. Gives what a scan of the whole longer file would,
/// without reading the file again (the checkpoint is the latest among the appended records).
/// `None` when `summary` did not end cleanly at `at`.
pub fn read_on(summary: &Summary, at: u64, appended: &[u8]) -> Option<Scan> {
    let tail = summary.end.as_ref().filter(|t| t.at.offset == at)?;
    let mut summarizer = Summarizer {
        header: Some(summary.header.clone()),
        header_end: summary.header_end,
        live: (*summary.live).clone(),
        exchanges: summary.exchanges,
        exchange_ends: None,
        problems: summary.problems.clone(),
        last_activity: tail.last_activity.clone(),
        pending: tail.pending.clone(),
        checkpoint: None,
        totals: summary.totals,
    };
    let end = Scanner::scan_from(appended, Some(tail.at), |e| summarizer.event(e))
        .expect("reading from memory cannot fail")
        .ok()?;
    Some(summarizer.finish(end))
}

/// Whether RFC 3339 time `a` is after `b`; a time that does not parse is never after one that
/// does (compared as text when neither parses).
fn later(a: &str, b: &str) -> bool {
    let parse = |t: &str| chrono::DateTime::parse_from_rfc3339(t).ok();
    match (parse(a), parse(b)) {
        (Some(a), Some(b)) => a > b,
        (None, None) => a > b,
        (a, _) => a.is_some(),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::transcript::testing::{self, hostile_text, record};
    use crate::transcript::{
        Header, Kind, Meta, Record, Transcript, render, render_header, render_record,
    };

    fn header() -> Header {
        testing::header("what changed?")
    }

    #[test]
    fn live_context_skips_failures_and_honours_clears_and_summaries() {
        let mut records = vec![
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::User, "lost"),
            record(Kind::Failed, "partial"),
            record(Kind::User, "2"),
            record(Kind::Attachment, "diff"),
            record(Kind::Assistant, "a2"),
        ];
        let text = render(&Transcript { header: header(), records: records.clone() });
        let s = summarize(text.as_bytes()).unwrap().unwrap();
        assert_eq!(s.exchanges, 2);
        fn content<'t>(text: &'t str, r: &Range<u64>) -> &'t str {
            &text[r.start as usize..r.end as usize]
        }
        let users: Vec<_> = s.live.exchanges.iter().map(|e| content(&text, &e.user)).collect();
        assert_eq!(users, ["1", "2"]);
        assert_eq!(content(&text, &s.live.exchanges[1].attachments[0].1), "diff");

        records.push(Record {
            kind: Kind::Compaction,
            meta: Meta { first: Some(1), through: Some(1), ..Meta::default() },
            content: "summary of 1".into(),
        });
        let text = render(&Transcript { header: header(), records: records.clone() });
        let s = summarize(text.as_bytes()).unwrap().unwrap();
        assert_eq!(content(&text, s.live.summary.as_ref().unwrap()), "summary of 1");
        assert_eq!(s.live.exchanges.len(), 1);
        assert_eq!(s.live.exchanges[0].number, 2);

        records.push(record(Kind::Clear, ""));
        records.push(record(Kind::User, "3"));
        let text = render(&Transcript { header: header(), records });
        let s = summarize(text.as_bytes()).unwrap().unwrap();
        assert_eq!(*s.live, Live::default());
        // A question with no outcome yet is not an exchange.
        assert_eq!(s.exchanges, 2);
    }

    /// A record of any kind (user turns, answers, clears and compactions more often than the
    /// rest), compactions standing for any turns, some with times.
    fn any_record() -> impl Strategy<Value = Record> {
        let kind = prop_oneof![
            3 => Just(Kind::User),
            3 => Just(Kind::Assistant),
            2 => Just(Kind::Clear),
            2 => Just(Kind::Compaction),
            1 => Just(Kind::Attachment),
            1 => Just(Kind::Failed),
            1 => Just(Kind::Interrupted),
        ];
        let meta = (
            proptest::option::of(0u64..6),
            proptest::option::of(0u64..8),
            proptest::option::of(0u32..60),
            proptest::option::of("[a-z]{0,4}"),
        );
        (kind, hostile_text(), meta).prop_map(|(kind, content, (first, through, minute, name))| {
            Record {
                kind,
                meta: Meta {
                    at: minute.map(|m| format!("2026-11-21T10:{m:02}:00Z")),
                    first,
                    through,
                    name,
                    ..Meta::default()
                },
                content,
            }
        })
    }

    /// What follows a header: records as cca writes them, and now and then damage (a record
    /// cut off by a crash, a line added by hand, a broken or stray marker).
    fn any_body(max: usize) -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            8 => any_record().prop_map(|r| render_record(&r, 1)),
            1 => (any_record(), any::<proptest::sample::Index>()).prop_map(|(r, cut)| {
                format!("{}\n", cut_at(&render_record(&r, 1), cut))
            }),
            1 => proptest::sample::select(vec![
                "a note by hand\n",
                "<!-- cca:bogus -->\n",
                "<!-- cca:end -->\n",
                "<!-- cca:session {} -->\n",
                "<!-- cca:user {\"at\": -->\n",
            ])
            .prop_map(str::to_string),
        ];
        proptest::collection::vec(piece, 0..max).prop_map(|v| v.concat())
    }

    /// `text` cut at `cut` (an index into it), on a character boundary.
    fn cut_at(text: &str, cut: proptest::sample::Index) -> &str {
        let at = cut.index(text.len() + 1);
        let at = (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap();
        &text[..at]
    }

    fn full_scan(text: &str) -> Result<Scan, String> {
        scan(text.as_bytes(), None).unwrap().map_err(|e| e.to_string())
    }

    #[test]
    fn a_checkpoint_follows_each_clear_and_compaction() {
        let mut records = vec![
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::Clear, ""),
            record(Kind::User, "2"),
            record(Kind::Assistant, "a2"),
        ];
        let text = render(&Transcript { header: header(), records: records.clone() });
        let first = full_scan(&text).unwrap();
        let checkpoint = first.checkpoint.unwrap();
        let clear = text.find("<!-- cca:clear").unwrap() as u64;
        assert_eq!(checkpoint.record.start, clear);
        assert!(text[..checkpoint.at.offset as usize].ends_with("<!-- cca:end -->\n"));
        assert_eq!(
            checkpoint.at.line,
            text[..checkpoint.at.offset as usize].lines().count() as u64
        );
        assert_eq!(checkpoint.exchanges, 1);

        records.push(Record {
            kind: Kind::Compaction,
            meta: Meta { first: Some(2), through: Some(2), ..Meta::default() },
            content: "summary".into(),
        });
        let text = render(&Transcript { header: header(), records });
        let checkpoint = full_scan(&text).unwrap().checkpoint.unwrap();
        assert_eq!(checkpoint.at.offset, text.len() as u64);
        assert_eq!(checkpoint.live.summary_turns, Some((2, 2)));

        // A compaction during a turn comes between its question and its answer: the
        // question is pending at the checkpoint, and the answer completes it after.
        let records = vec![
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::User, "2"),
            Record {
                kind: Kind::Compaction,
                meta: Meta { first: Some(1), through: Some(1), ..Meta::default() },
                content: "summary of 1".into(),
            },
            record(Kind::Assistant, "a2"),
        ];
        let text = render(&Transcript { header: header(), records });
        let whole = full_scan(&text).unwrap();
        let checkpoint = whole.checkpoint.unwrap();
        assert!(checkpoint.pending.is_some());
        let rest = &text.as_bytes()[checkpoint.at.offset as usize..];
        let tail = scan(rest, Some(&checkpoint)).unwrap().unwrap();
        assert_eq!(tail.summary, whole.summary);
        assert_eq!(tail.summary.live.exchanges.len(), 1);
        assert_eq!(tail.summary.exchanges, 2);

        // A session never cleared has no place to start but the beginning.
        let text = render(&Transcript {
            header: header(),
            records: vec![record(Kind::User, "1"), record(Kind::Assistant, "a1")],
        });
        assert_eq!(full_scan(&text).unwrap().checkpoint, None);
    }

    #[test]
    fn a_checkpoint_too_large_to_keep_leaves_the_earlier_one() {
        let mut records = vec![record(Kind::Clear, "")];
        for n in 0..CHECKPOINT_ITEMS + 1 {
            records.push(record(Kind::User, &n.to_string()));
            records.push(record(Kind::Assistant, "a"));
        }
        // Stands for none of them: all stay live.
        records.push(Record {
            kind: Kind::Compaction,
            meta: Meta { first: Some(1), through: Some(0), ..Meta::default() },
            content: "nothing".into(),
        });
        let text = render(&Transcript { header: header(), records });
        let whole = full_scan(&text).unwrap();
        let checkpoint = whole.checkpoint.unwrap();
        assert_eq!(&text[checkpoint.record.start as usize..][..14], "<!-- cca:clear");
        let rest = &text.as_bytes()[checkpoint.at.offset as usize..];
        assert_eq!(scan(rest, Some(&checkpoint)).unwrap().unwrap().summary, whole.summary);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The file as it was when a checkpoint was taken (cut anywhere, as by a crash), then
        /// records appended (cut anywhere after the checkpoint): reading on from the checkpoint
        /// gives exactly what reading the whole file gives.
        #[test]
        fn reading_on_from_a_checkpoint_is_reading_it_all(
            before in any_body(12),
            after in any_body(6),
            cut_before in proptest::option::of(any::<proptest::sample::Index>()),
            cut_after in any::<proptest::sample::Index>(),
        ) {
            let then = render_header(&header()) + &before;
            let then = cut_before.map_or(then.as_str(), |cut| cut_at(&then, cut));
            let Ok(Scan { checkpoint: Some(checkpoint), .. }) = full_scan(then) else {
                return Ok(());
            };
            // As it is kept: through JSON.
            let json = serde_json::to_string(&checkpoint).unwrap();
            let kept: Checkpoint = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(&kept, &checkpoint);

            let now = format!("{then}{after}");
            let from = checkpoint.at.offset as usize;
            let now = &now[..from + cut_at(&now[from..], cut_after).len()];
            let whole = full_scan(now).unwrap();
            let tail = scan(&now.as_bytes()[from..], Some(&kept)).unwrap().unwrap();
            prop_assert_eq!(&tail.summary, &whole.summary);
            prop_assert_eq!(&tail.checkpoint, &whole.checkpoint);
        }

        /// Records appended after a summary was read are read on from it, without the file.
        #[test]
        fn reading_on_over_appended_records_is_reading_it_all(
            before in any_body(10),
            after in proptest::collection::vec(any_record(), 0..4),
            cut in any::<proptest::sample::Index>(),
            whole_file in any::<bool>(),
        ) {
            let then = render_header(&header()) + &before;
            let then = if whole_file { then.as_str() } else { cut_at(&then, cut) };
            let Ok(first) = full_scan(then) else { return Ok(()) };
            let more: String = after.iter().map(|r| render_record(r, 1)).collect();
            let now = format!("{then}{more}");
            let whole = full_scan(&now).unwrap();
            let at = then.len() as u64;
            match read_on(&first.summary, at, more.as_bytes()) {
                Some(on) => {
                    prop_assert_eq!(&on.summary, &whole.summary);
                    let appended_checkpoint = whole.checkpoint.filter(|c| c.at.offset > at);
                    prop_assert_eq!(on.checkpoint, appended_checkpoint);
                }
                // Only a file that does not end cleanly cannot be read on from: in the middle
                // of a line, or of a record.
                None => {
                    let open = first.summary.problems.last().is_some_and(|p| {
                        p.message.contains("was cut off before its end marker")
                    });
                    prop_assert!(!then.ends_with('\n') || open);
                }
            }
            prop_assert!(read_on(&first.summary, at + 1, more.as_bytes()).is_none());
        }
    }
}
