//! Searching every conversation for `cca mcp`'s `search` with `"regex": true`: `grep::Searcher`
//! (what `cca grep` runs) over the sessions newest first, on a few threads, each transcript's
//! hits gathered by exchange, stopping once enough is found; and each exchange found (by a
//! pattern, or ranked by `crate::recall`) shown as an excerpt.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::grep::{Matcher, Options, Searcher, Shown, Sink};
use crate::store::Store;
use crate::transcript::{Header, Kind};

use super::shown::{Text, session_line};

/// An excerpt: so much of the question, and of the answer, around the hit.
const QUESTION_CHARS: usize = 600;
const ANSWER_CHARS: usize = 1_500;
/// Matching lines quoted for an exchange, and so many characters of each.
const HIT_LINES: usize = 3;
const HIT_CHARS: usize = 300;

/// Which conversations a search looks at.
pub(super) struct Filter {
    pub(super) cwd: Option<PathBuf>,
    pub(super) engine: Option<String>,
}

/// One exchange with a hit.
pub(super) struct Hit {
    pub(super) turn: u64,
    pub(super) at: Option<String>,
    /// The first few matching lines, as written.
    pub(super) lines: Vec<String>,
    /// Which of the query's words it holds (bit i: word i).
    pub(super) words: u64,
}

/// A conversation with hits.
pub(super) struct Found {
    pub(super) id: String,
    pub(super) header: Header,
    pub(super) hits: Vec<Hit>,
}

pub(super) struct Searched {
    /// The conversations searched, newest first, up to the first not searched.
    pub(super) sessions: Vec<Found>,
    pub(super) done: usize,
    pub(super) unreadable: usize,
}

pub(super) struct Job<'a> {
    pub(super) store: &'a Store,
    pub(super) matcher: &'a Matcher,
    pub(super) opts: &'a Options,
    pub(super) filter: &'a Filter,
    /// A word search's words (lower case); empty for a pattern.
    pub(super) words: &'a [String],
}

/// What the searching threads share: results by place in the list, and how far from the start
/// the list is searched without a gap.
#[derive(Default)]
pub(super) struct Progress {
    pub(super) done: BTreeMap<usize, Result<Option<Found>, ()>>,
    pub(super) prefix: usize,
    pub(super) matched: usize,
}

impl Job<'_> {
    pub(super) fn qualifies(&self, hit: &Hit) -> bool {
        let all = if self.words.len() >= 64 { u64::MAX } else { (1u64 << self.words.len()) - 1 };
        hit.words & all == all
    }

    /// Searches `ids` in order on a few threads, until more than `limit` exchanges qualify among
    /// the conversations searched from the start of the list without a gap.
    pub(super) fn run(&self, ids: &[String], limit: usize) -> Searched {
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let progress = Mutex::new(Progress::default());
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 8);
        std::thread::scope(|scope| {
            for _ in 0..threads.min(ids.len()).max(1) {
                scope.spawn(|| {
                    let mut searcher = Searcher::new();
                    let matcher = self.matcher.clone();
                    while !stop.load(Ordering::Relaxed) {
                        let index = next.fetch_add(1, Ordering::Relaxed);
                        let Some(id) = ids.get(index) else { return };
                        let found = self.one(&mut searcher, &matcher, id);
                        let mut p = progress.lock().unwrap_or_else(|e| e.into_inner());
                        p.done.insert(index, found);
                        while let Some(found) = p.done.get(&p.prefix) {
                            let n = match found {
                                Ok(Some(f)) => f.hits.iter().filter(|h| self.qualifies(h)).count(),
                                _ => 0,
                            };
                            p.matched += n;
                            p.prefix += 1;
                        }
                        if p.matched > limit {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let p = progress.into_inner().unwrap_or_else(|e| e.into_inner());
        let mut searched = Searched { sessions: Vec::new(), done: p.prefix, unreadable: 0 };
        for (_, found) in p.done.into_iter().take_while(|(i, _)| *i < p.prefix) {
            match found {
                Ok(Some(found)) => searched.sessions.push(found),
                Ok(None) => {}
                Err(()) => searched.unreadable += 1,
            }
        }
        searched
    }

    fn one(
        &self,
        searcher: &mut Searcher,
        matcher: &Matcher,
        id: &str,
    ) -> Result<Option<Found>, ()> {
        let file = self.store.open_transcript(&self.store.session_path(id)).map_err(|_| ())?;
        let mut sink = Collect { job: self, header: None, hits: Vec::new() };
        match searcher.search(&file, matcher, self.opts, &mut sink) {
            Ok(Ok(_)) => {}
            _ => return Err(()),
        }
        Ok(match (sink.header, sink.hits.is_empty()) {
            (Some(header), false) => Some(Found { id: id.to_string(), header, hits: sink.hits }),
            _ => None,
        })
    }
}

/// Gathers one conversation's hits, by exchange.
pub(super) struct Collect<'j, 'a> {
    pub(super) job: &'j Job<'a>,
    pub(super) header: Option<Header>,
    pub(super) hits: Vec<Hit>,
}

impl Sink for Collect<'_, '_> {
    fn header(&mut self, header: &Header) -> bool {
        let filter = self.job.filter;
        if filter.engine.as_ref().is_some_and(|e| e != &header.engine)
            || filter.cwd.as_ref().is_some_and(|cwd| !Path::new(&header.cwd).starts_with(cwd))
        {
            return false;
        }
        self.header = Some(header.clone());
        true
    }

    fn line(&mut self, line: &Shown) -> bool {
        // An answer with no question is no exchange: there is none to point at.
        if line.place.stray {
            return true;
        }
        let turn = line.place.turn;
        if self.hits.last().is_none_or(|h| h.turn != turn) {
            self.hits.push(Hit { turn, at: None, lines: Vec::new(), words: 0 });
        }
        let hit = self.hits.last_mut().expect("pushed above");
        let text = String::from_utf8_lossy(line.text);
        if !self.job.words.is_empty() {
            let lower = text.to_lowercase();
            for (i, word) in self.job.words.iter().enumerate().take(64) {
                if lower.contains(word.as_str()) {
                    hit.words |= 1 << i;
                }
            }
        }
        if hit.at.is_none() {
            hit.at = line.place.meta.at.clone();
        }
        if hit.lines.len() < HIT_LINES {
            hit.lines.push(cut(text.trim(), HIT_CHARS));
        }
        true
    }

    fn gap(&mut self) -> bool {
        true
    }
}

/// An exchange's question and what answered it, for an excerpt.
pub(super) struct Excerpt {
    pub(super) turn: u64,
    pub(super) question: Option<Text>,
    pub(super) answer: Option<Text>,
}

/// An exchange found: the conversation's line (before its first exchange shown), the lines
/// that matched, the question and the answer around them.
pub(super) fn excerpt_block(
    session: &Found,
    hit: &Hit,
    texts: Option<&Excerpt>,
    first: bool,
) -> String {
    let mut out = String::new();
    if first {
        let _ = writeln!(out, "\n══ {}", session_line(&session.id, &session.header));
    }
    out.push('\n');
    let at = hit.at.as_deref().map(|at| format!(" ({at})")).unwrap_or_default();
    let _ = writeln!(out, "Exchange {}{at}. Matching lines:", hit.turn);
    for line in &hit.lines {
        let _ = writeln!(out, "  > {line}");
    }
    let Some(texts) = texts else { return out };
    if let Some(q) = &texts.question {
        let _ = writeln!(out, "Question:\n{}", window(&q.text, &hit.lines, QUESTION_CHARS));
    }
    match &texts.answer {
        Some(a) => {
            let label = match a.kind {
                Kind::Assistant => "Answer",
                Kind::Failed => "Not answered; the partial answer",
                _ => "Interrupted; the partial answer",
            };
            let _ = writeln!(
                out,
                "{label} ({}):\n{}",
                a.meta.engine.as_deref().unwrap_or("engine"),
                window(&a.text, &hit.lines, ANSWER_CHARS)
            );
        }
        None => out.push_str("(no answer recorded)\n"),
    }
    let _ = writeln!(out, "[all of it: read id={} from={} to={}]", session.id, hit.turn, hit.turn);
    out
}

/// At most `max` characters of `text`, starting a little before the first of `lines` it holds.
fn window(text: &str, lines: &[String], max: usize) -> String {
    let text = text.trim_end();
    // A line shown cut (`…` at either end: a long line is shown around the word found) is
    // looked for by what is shown of it.
    let found = lines.iter().find_map(|l| {
        let shown = l.trim_start_matches('…').trim_end_matches('…');
        text.find(shown).filter(|_| !shown.is_empty())
    });
    let total = text.chars().count();
    if total <= max {
        return text.to_string();
    }
    let start = found.map_or(0, |at| {
        let before = text[..at].chars().count();
        before.saturating_sub(max / 5)
    });
    let start = start.min(total.saturating_sub(max));
    let piece: String = text.chars().skip(start).take(max).collect();
    let head = if start > 0 { "…" } else { "" };
    let tail = if start + max < total { "…" } else { "" };
    format!("{head}{piece}{tail}")
}

/// At most `max` characters of a line, with `…` when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_starts_near_the_hit() {
        let text = format!("{}needle here{}", "a".repeat(5000), "b".repeat(5000));
        let w = window(&text, &["needle here".into()], 100);
        assert!(w.starts_with('…') && w.ends_with('…') && w.contains("needle here"), "{w}");
        assert_eq!(window("short", &[], 100), "short");
        // A line recall showed around its word, cut at both ends.
        let w = window(&text, &["…aaaaneedle herebbb…".into()], 100);
        assert!(w.contains("needle here"), "{w}");
    }
}
