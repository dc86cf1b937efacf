//! Finding what was said: a pattern matched against the content of a transcript, line by line,
//! each matching line placed in its record (question, attachment, answer, summary), its exchange
//! and who said it. cca's own lines (the header, markers, headings, the fences it adds) never
//! match, text between records is not content, and content is matched as written: a line the
//! transcript stores escaped is matched without the escape.
//!
//! Pure: bytes in through [`Source`], lines out through [`Sink`]. `cmd::grep` chooses the
//! transcripts, opens them through `store`, and prints.
//!
//! Speed comes from searching whole buffers: the regex runs over many lines at once, and only a
//! line it hits is placed in the transcript's structure, by a [`Skim`] that follows the records
//! from marker to marker (the transcript scanner's own rules, fed only the lines that decide
//! them). A transcript without a hit costs its reads and one regex pass, as in ripgrep. Memory is
//! one buffer, grown only to hold the longest line.

use std::io;
use std::ops::Range;
use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use memchr::memmem::Finder;

use crate::transcript::{Header, Kind, Meta, NotTranscript, Skim};

/// How much of a transcript is read at once (a whole session, usually).
const BUFFER: usize = 256 * 1024;
/// Reads ahead, when a record with a hit runs past the buffer, are this size.
const AHEAD: usize = 64 * 1024;
const MARKER: &[u8] = b"<!-- cca:";

/// An escaped content line holds this (after the backslashes that start it).
static ESCAPED: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\<!-- cca:"));

mod matcher;
mod search;

pub(crate) use matcher::{Case, Matcher, PatternOptions};
pub(crate) use search::Numbering;
use search::{Places, Search};

/// Reads a transcript from where it is: a file, or bytes in memory.
pub(crate) trait Source {
    /// Reads at `offset`; 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
}

impl Source for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
}

impl Source for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let rest = self.get(offset as usize..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        Ok(n)
    }
}

fn read_at(source: &(impl Source + ?Sized), buf: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match source.read_at(buf, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Who said something: the user (a question, an attachment) or the engine (an answer, a
/// partial answer, a summary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

impl Role {
    pub(crate) fn of(kind: Kind) -> Role {
        match kind {
            Kind::User | Kind::Attachment => Role::User,
            _ => Role::Assistant,
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Lines of context around each match, from the same record.
    pub context: usize,
    pub role: Option<Role>,
    /// Only what was said in this time (a record's `at`, else the session's start).
    pub since: Option<DateTime<Utc>>,
    pub until: Option<DateTime<Utc>>,
    /// Stop at the first match.
    pub first_only: bool,
    /// Find each line's number and where in it the pattern matched (for JSON and colour).
    /// Without, [`Shown::number`] is 0 and [`Shown::matches`] empty: printing plain lines
    /// needs neither, and skipping them saves a pass over every match and every newline.
    pub positions: bool,
}

/// The record a line belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Place {
    pub kind: Kind,
    pub meta: Meta,
    /// The exchange it belongs to, as its heading numbers it.
    pub turn: u64,
    /// An answer with no question before it: no exchange's, though numbered as the next one
    /// ([`Numbering::stray`]).
    pub stray: bool,
    /// Where the record's content is in the file (stored form).
    content: Range<u64>,
}

/// A line to show.
#[derive(Debug)]
pub(crate) struct Shown<'a> {
    pub place: &'a Place,
    /// Its line number in the file, from 1 (with [`Options::positions`]).
    pub number: u64,
    /// The line as it was written: unescaped, without its line ending.
    pub text: &'a [u8],
    /// A line of context, not a match.
    pub context: bool,
    /// Where the pattern matched (with [`Options::positions`]).
    pub matches: &'a [Range<usize>],
}

/// Where the lines found go.
pub(crate) trait Sink {
    /// The transcript's header, before any line; `false` skips the transcript.
    fn header(&mut self, header: &Header) -> bool;
    /// A matching line, or one of context; `false` stops the search.
    fn line(&mut self, line: &Shown) -> bool;
    /// The next line shown does not follow the last one; `false` stops the search.
    fn gap(&mut self) -> bool;
}

/// Searches transcripts one after another, reusing its buffers.
pub(crate) struct Searcher {
    buf: Vec<u8>,
    ahead: Vec<u8>,
}

impl Default for Searcher {
    fn default() -> Self {
        Self::new()
    }
}

impl Searcher {
    pub(crate) fn new() -> Searcher {
        Self::with_buffer(BUFFER)
    }

    fn with_buffer(size: usize) -> Searcher {
        Searcher { buf: vec![0; size.max(1)], ahead: Vec::new() }
    }

    /// Searches one transcript; returns how many lines matched, or why it is not a transcript.
    pub(crate) fn search(
        &mut self,
        source: &(impl Source + ?Sized),
        matcher: &Matcher,
        opts: &Options,
        sink: &mut impl Sink,
    ) -> io::Result<Result<u64, NotTranscript>> {
        let mut s = Search {
            source,
            matcher,
            opts,
            buf: std::mem::take(&mut self.buf),
            start: 0,
            filled: 0,
            eof: false,
            searched: 0,
            escaped_at: None,
            skim: Skim::new(),
            ahead: std::mem::take(&mut self.ahead),
            ahead_at: 0,
            places: Places::default(),
            counted_to: 0,
            counted: 0,
            printed_end: None,
            after: None,
            found: Vec::new(),
            matched: 0,
        };
        // `ahead` holds nothing yet: a read ahead starts by filling it.
        s.ahead.clear();
        let result = s.run(sink);
        self.buf = s.buf;
        self.ahead = s.ahead;
        result
    }
}

/// Searches one transcript; returns how many lines matched, or why it is not a transcript.
#[cfg(test)]
fn search(
    source: &(impl Source + ?Sized),
    matcher: &Matcher,
    opts: &Options,
    sink: &mut impl Sink,
) -> io::Result<Result<u64, NotTranscript>> {
    Searcher::new().search(source, matcher, opts, sink)
}

#[cfg(test)]
fn search_with(
    source: &(impl Source + ?Sized),
    matcher: &Matcher,
    opts: &Options,
    sink: &mut impl Sink,
    buffer: usize,
) -> io::Result<Result<u64, NotTranscript>> {
    Searcher::with_buffer(buffer).search(source, matcher, opts, sink)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::testing::any_kind;
    use crate::transcript::{self, Event, Record, Transcript};
    use proptest::prelude::*;

    fn header() -> Header {
        crate::transcript::testing::header("the title says needle")
    }

    fn record(kind: Kind, content: &str) -> Record {
        let meta = Meta { engine: Some("claude".into()), ..Meta::default() };
        Record { kind, meta, content: content.into() }
    }

    fn text(records: Vec<Record>) -> String {
        transcript::render(&Transcript { header: header(), records })
    }

    /// What a search shows, one string per line: `turn kind number: text` (`-` for context),
    /// and `--` for a gap.
    #[derive(Default)]
    struct Lines {
        shown: Vec<String>,
        skip: bool,
    }

    impl Sink for Lines {
        fn header(&mut self, _: &Header) -> bool {
            !self.skip
        }

        fn line(&mut self, line: &Shown) -> bool {
            let sep = if line.context { '-' } else { ':' };
            self.shown.push(format!(
                "{} {} {}{sep} {}",
                line.place.turn,
                line.place.kind.word(),
                line.number,
                String::from_utf8_lossy(line.text)
            ));
            true
        }

        fn gap(&mut self) -> bool {
            self.shown.push("--".into());
            true
        }
    }

    fn grep_with(text: &str, pattern: &str, opts: &Options, buffer: usize) -> Vec<String> {
        let case = PatternOptions { case: Case::Smart, fixed: false, word: false };
        let matcher = Matcher::new(pattern, &case).unwrap();
        let run = |positions| {
            let opts = Options { positions, ..opts.clone() };
            let mut lines = Lines::default();
            match search_with(text.as_bytes(), &matcher, &opts, &mut lines, buffer).unwrap() {
                Ok(_) => lines.shown,
                Err(_) => {
                    assert!(lines.shown.is_empty());
                    Vec::new()
                }
            }
        };
        let with = run(true);
        // Without positions: the same lines, numbered 0.
        // `turn kind number: text` without the number.
        let strip = |l: &String| match l.splitn(3, ' ').collect::<Vec<_>>()[..] {
            [turn, kind, rest] => {
                format!("{turn} {kind} {}", rest.trim_start_matches(|c: char| c.is_ascii_digit()))
            }
            _ => l.clone(),
        };
        let without: Vec<String> = run(false).iter().map(strip).collect();
        assert_eq!(without, with.iter().map(strip).collect::<Vec<_>>());
        with
    }

    fn grep(text: &str, pattern: &str, opts: &Options) -> Vec<String> {
        grep_with(text, pattern, opts, BUFFER)
    }

    #[test]
    fn finds_content_and_never_what_cca_wrote() {
        let t = text(vec![
            record(Kind::User, "a needle in the question"),
            record(Kind::Attachment, "needle in stdin"),
            record(Kind::Assistant, "## 1. You\nthe answer\n```\nneedle```"),
        ]);
        // Markers, headings, the header and the fences hold `cca`, `You`, `1.`, "```"; only
        // content counts.
        assert_eq!(grep(&t, "cca|claude|session", &Options::default()), Vec::<String>::new());
        assert_eq!(grep(&t, "^## 1. You", &Options::default()), ["1 assistant 24: ## 1. You"]);
        assert_eq!(
            grep(&t, "needle", &Options::default()),
            [
                "1 user 10: a needle in the question",
                "1 attachment 17: needle in stdin",
                "1 assistant 27: needle```"
            ]
        );
        assert_eq!(grep(&t, "^```$", &Options::default()), ["1 assistant 26: ```"]);
        let lines: Vec<&str> = t.lines().collect();
        for shown in grep(&t, "needle", &Options::default()) {
            let (head, text) = shown.split_once(": ").unwrap();
            let number: usize = head.rsplit(' ').next().unwrap().parse().unwrap();
            assert_eq!(lines[number - 1], text);
        }
    }

    #[test]
    fn escaped_lines_match_as_written() {
        let t = text(vec![
            record(Kind::User, "<!-- cca:end -->\n\\<!-- cca:user -->"),
            record(Kind::Assistant, "ok"),
        ]);
        assert!(t.contains("\n\\<!-- cca:end -->\n\\\\<!-- cca:user -->\n"), "{t}");
        assert_eq!(grep(&t, "^<!-- cca:end", &Options::default()), ["1 user 10: <!-- cca:end -->"]);
        // Unanchored patterns find escaped lines through the buffer-wide search, and are
        // checked on the line as written: the stored backslash is not there to match.
        assert_eq!(grep(&t, "cca:end", &Options::default()), ["1 user 10: <!-- cca:end -->"]);
        assert_eq!(grep(&t, r"\\<!-- cca:end", &Options::default()), Vec::<String>::new());
        assert_eq!(grep(&t, r"^\\<!", &Options::default()), ["1 user 11: \\<!-- cca:user -->"]);
    }

    #[test]
    fn turns_and_roles_follow_the_headings() {
        let t = text(vec![
            record(Kind::User, "q1 word"),
            record(Kind::Assistant, "a1 word"),
            record(Kind::User, "q2 word"),
            record(Kind::Failed, "partial word"),
            record(Kind::User, "q2 again word"),
            record(Kind::Assistant, "a2 word"),
            record(Kind::Compaction, "summary word"),
            record(Kind::User, "q3 word"),
        ]);
        let shown = grep(&t, "word", &Options::default());
        let turns: Vec<&str> = shown.iter().map(|l| &l[..l.find(' ').unwrap() + 2]).collect();
        assert_eq!(turns, ["1 u", "1 a", "2 u", "2 f", "2 u", "2 a", "3 c", "3 u"]);
        for (line, heading) in [("q2 again", "## 2. You"), ("a2 word", "## 2. claude")] {
            let at = t.find(line).unwrap();
            assert!(t[..at].trim_end().ends_with(heading), "{line}");
        }
        let users = Options { role: Some(Role::User), ..Options::default() };
        assert_eq!(grep(&t, "word", &users).len(), 4);
        let answers = Options { role: Some(Role::Assistant), ..Options::default() };
        assert_eq!(grep(&t, "word", &answers).len(), 4);
    }

    #[test]
    fn damaged_records_and_notes_between_records_are_not_content() {
        let good = text(vec![record(Kind::User, "kept word"), record(Kind::Assistant, "a")]);
        let t = good.replace(
            "<!-- cca:end -->\n\n<!-- cca:assistant",
            "<!-- cca:end -->\nnote word\n\n<!-- cca:assistant",
        ) + "\n<!-- cca:user -->\n## 2. You\n\ncut off word\n";
        assert_eq!(grep(&t, "word", &Options::default()), ["1 user 10: kept word"]);
    }

    #[test]
    fn context_stays_in_its_record() {
        let t = text(vec![
            record(Kind::User, "q"),
            record(Kind::Assistant, "one\ntwo\nthree !\nfour\nfive\nsix\nseven !\neight"),
            record(Kind::User, "after"),
        ]);
        let c1 = Options { context: 1, ..Options::default() };
        assert_eq!(
            grep(&t, "!$", &c1),
            [
                "1 assistant 17- two",
                "1 assistant 18: three !",
                "1 assistant 19- four",
                "--",
                "1 assistant 21- six",
                "1 assistant 22: seven !",
                "1 assistant 23- eight",
            ]
        );
        let c9 = Options { context: 9, ..Options::default() };
        let shown = grep(&t, "!$", &c9);
        assert_eq!(shown.len(), 8, "{shown:?}");
        assert!(shown[0].ends_with("- one") && shown[7].ends_with("- eight"), "{shown:?}");
        // Small buffers give the same answer: context kept across reads.
        for buffer in [1, 5, 16, 64] {
            assert_eq!(grep_with(&t, "!$", &c1, buffer), grep(&t, "!$", &c1), "{buffer}");
            assert_eq!(grep_with(&t, "!$", &c9, buffer), shown, "{buffer}");
        }
    }

    #[test]
    fn crlf_lines_match_at_their_end_and_show_without_cr() {
        let t = text(vec![record(Kind::User, "one end\r\ntwo\r\n"), record(Kind::Assistant, "a")]);
        assert_eq!(grep(&t, "end$", &Options::default()), ["1 user 10: one end"]);
    }

    #[test]
    fn a_line_is_matched_without_its_line_ending() {
        // Found by the property test: a CRLF line is not an empty line before its `\n`.
        let t = text(vec![record(Kind::User, "\\\r\n"), record(Kind::Assistant, "a")]);
        assert_eq!(grep(&t, "^$", &Options::default()), ["1 user 11: "]);
        assert_eq!(grep(&t, r"^\\$", &Options::default()), ["1 user 10: \\"]);
    }

    #[test]
    fn an_empty_record_has_no_line_to_match() {
        // Found by the property test: a hand-made record with nothing between its markers.
        let t = text(vec![]) + "\n<!-- cca:failed -->\n<!-- cca:end -->\n";
        assert_eq!(grep(&t, "^$", &Options::default()), Vec::<String>::new());
        let cleared = text(vec![record(Kind::Clear, "")]);
        assert_eq!(grep(&cleared, "^$", &Options::default()), Vec::<String>::new());
    }

    #[test]
    fn time_filters_use_when_each_record_was_said() {
        let mut early = record(Kind::User, "word early");
        early.meta.at = Some("2026-11-21T10:00:00Z".into());
        let mut late = record(Kind::Assistant, "word late");
        late.meta.at = Some("2026-11-22T10:00:00Z".into());
        let t = text(vec![early, late]);
        let at = |s: &str| Some(DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc));
        let since = Options { since: at("2026-11-22T00:00:00Z"), ..Options::default() };
        assert_eq!(grep(&t, "word", &since), ["1 assistant 16: word late"]);
        let until = Options { until: at("2026-11-22T00:00:00Z"), ..Options::default() };
        assert_eq!(grep(&t, "word", &until), ["1 user 10: word early"]);
    }

    #[test]
    fn a_skipped_header_or_a_non_transcript_ends_the_search() {
        let t = text(vec![record(Kind::User, "word")]);
        let matcher =
            Matcher::new("word", &PatternOptions { case: Case::Smart, fixed: false, word: false })
                .unwrap();
        let mut skip = Lines { skip: true, ..Lines::default() };
        assert_eq!(
            search(t.as_bytes(), &matcher, &Options::default(), &mut skip).unwrap().unwrap(),
            0
        );
        let mut lines = Lines::default();
        let bad = search(&b"word\n"[..], &matcher, &Options::default(), &mut lines).unwrap();
        assert!(bad.is_err() && lines.shown.is_empty());
    }

    #[test]
    fn patterns_smart_case_words_and_text() {
        let opts = |case, fixed, word| PatternOptions { case, fixed, word };
        let m = |p: &str, o: PatternOptions, line: &str| {
            let mut found = Vec::new();
            Matcher::new(p, &o).unwrap().find_in(line.as_bytes(), &mut found);
            !found.is_empty()
        };
        assert!(m("rust", opts(Case::Smart, false, false), "RUST"));
        assert!(!m("Rust", opts(Case::Smart, false, false), "RUST"));
        // Escapes are not letters of the pattern's own: \S stays smart.
        assert!(m(r"\Sust", opts(Case::Smart, false, false), "RUST"));
        assert!(!m("[A-Z]ust", opts(Case::Smart, false, false), "rust"));
        assert!(m("Rust", opts(Case::Insensitive, false, false), "RUST"));
        assert!(!m("rust", opts(Case::Sensitive, false, false), "RUST"));
        assert!(m("a.b(", opts(Case::Smart, true, false), "x a.b( y"));
        assert!(!m("a.b", opts(Case::Smart, true, false), "axb"));
        assert!(m("lock", opts(Case::Smart, false, true), "a lock."));
        assert!(!m("lock", opts(Case::Smart, false, true), "unlocked"));
        assert!(m("lock!", opts(Case::Smart, true, true), "the lock!"));
        assert!(m("a)|(b", opts(Case::Smart, true, true), "a)|(b"));
        assert!(Matcher::new("a)|(b", &opts(Case::Smart, false, true)).is_err());
    }

    #[test]
    fn hostile_patterns_are_errors_not_hangs() {
        let o = PatternOptions { case: Case::Smart, fixed: false, word: false };
        let too_big = Matcher::new(r"\w{1000}{1000}", &o).unwrap_err();
        assert!(too_big.contains("too large"), "{too_big}");
        let deep = format!("{}a{}", "(".repeat(1000), ")".repeat(1000));
        assert!(Matcher::new(&deep, &o).is_err());
        assert!(Matcher::new("(", &o).is_err());
        assert!(Matcher::new(r"a\nb", &o).unwrap_err().contains("line break"));
        let fixed = PatternOptions { fixed: true, ..o };
        assert!(Matcher::new("a\nb", &fixed).unwrap_err().contains("line break"));
        // A class may hold a line break: it matches other characters too.
        assert!(Matcher::new(r"a\sb", &o).is_ok());
    }

    /// What a search must find, the slow way: the scanner's records, every line of their
    /// content unescaped and matched on its own.
    fn oracle(text: &str, pattern: &str) -> Vec<String> {
        let case = PatternOptions { case: Case::Smart, fixed: false, word: false };
        let matcher = Matcher::new(pattern, &case).unwrap();
        let mut spans = Vec::new();
        let scanned = transcript::Scanner::scan(text.as_bytes(), |e| {
            if let Event::Record(span) = e {
                spans.push(span)
            }
        });
        if !matches!(scanned, Ok(Ok(()))) {
            return Vec::new();
        }
        let (mut exchanges, mut pending, mut found) = (0, false, Vec::new());
        let mut out = Vec::new();
        for span in &spans {
            let turn = exchanges + 1;
            match span.kind {
                Kind::User => pending = true,
                Kind::Assistant if pending => {
                    exchanges += 1;
                    pending = false;
                }
                Kind::Failed | Kind::Interrupted | Kind::Clear => pending = false,
                _ => {}
            }
            let (from, to) = (span.content.start as usize, span.content.end as usize);
            // An empty range is one empty line, or (in a damaged record) no line at all.
            let no_lines = from == to && text.as_bytes().get(from) != Some(&b'\n');
            if span.kind == Kind::Clear || no_lines {
                continue;
            }
            for line in transcript::unescape(&text[from..to]).split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                matcher.find_in(line.as_bytes(), &mut found);
                if !found.is_empty() {
                    out.push(format!("{turn} {} {line}", span.kind.word()));
                }
            }
        }
        out
    }

    fn hostile_text() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("<!-- cca:end -->".to_string()),
            Just("<!-- cca:end fence -->".to_string()),
            Just("<!-- cca:user {\"at\":\"x\"} -->".to_string()),
            Just("<!-- cca:assistant -->".to_string()),
            Just("\\".to_string()),
            Just("```".to_string()),
            Just("# ".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            Just("a".to_string()),
            Just("cca".to_string()),
            "[a-c`#<>!\\- ]{0,6}",
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn finds_exactly_the_content_lines_that_match(
            contents in proptest::collection::vec((any_kind(), hostile_text()), 0..6),
            junk in hostile_text(),
            cut in any::<proptest::sample::Index>(),
            pattern in proptest::sample::select(vec!["a", "cca", "^$", "end", "<!--", r"\\", "^<!-- cca:", "x*", "```", "^#", "c$"]),
            buffer in 1usize..300,
        ) {
            let records = contents.into_iter().map(|(k, c)| record(k, &c)).collect();
            let full = text(records);
            let at = cut.index(full.len() + 1);
            let at = (0..=at).rev().find(|&i| full.is_char_boundary(i)).unwrap();
            let t = format!("{}{junk}", &full[..at]);
            let expected = oracle(&t, pattern);
            let shown = grep_with(&t, pattern, &Options::default(), buffer);
            let file_lines: Vec<&str> = t.split('\n').collect();
            let mut got = Vec::new();
            for line in &shown {
                // `turn kind number: text`; the number is where that text is in the file.
                let (head, text) = line.split_once(": ").unwrap();
                let mut parts = head.split(' ');
                let (turn, kind, number) = (parts.next().unwrap(), parts.next().unwrap(), parts.next().unwrap());
                let in_file = file_lines[number.parse::<usize>().unwrap() - 1];
                let in_file = in_file.strip_suffix('\r').unwrap_or(in_file);
                prop_assert!(in_file == text || in_file.strip_prefix('\\') == Some(text), "{line} vs {in_file}");
                got.push(format!("{turn} {kind} {text}"));
            }
            prop_assert_eq!(got, expected);
        }
    }
}
