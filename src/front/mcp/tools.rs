//! The tools `cca mcp` offers: `search` (every conversation: ranked through `crate::recall`,
//! or a regular expression through `crate::grep`), `read` (a
//! conversation or some of its exchanges, through the transcript scanner) and `list` (recent
//! conversations, from `store.listing()`, as `cca sessions`).
//!
//! Every answer is text for a model: bounded ([`OUTPUT`] characters, with a note of what was
//! left out and how to get it), and safe ([`safe_text`]: nothing in it can drive a terminal).
//! Bad arguments, an unknown session or an unreadable one are an error text the model can act
//! on. Nothing here writes a transcript or takes a lock.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::BufReader;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{Value, json};

use super::find::{Excerpt, Filter, Found, Hit, Job, Searched, excerpt_block};
use super::safe::safe_text;
use super::shown::{Text, quoted_title, record_heading, session_line};
use crate::config::Settings;
use crate::grep::{Case, Matcher, Numbering, Options, PatternOptions};
use crate::recall;
use crate::store::{self, Store};
use crate::transcript::{Direction, Event, Header, Kind, MarkerEscaper, Scanner};

/// The most characters one answer holds (about 5,000 tokens): well under what clients accept
/// from a tool (Claude Code warns past 10,000 tokens), and enough for a dozen excerpts.
const OUTPUT: usize = 20_000;
/// What the notes at the end of an answer may take of [`OUTPUT`]; the rest is for what was found.
const NOTES: usize = 600;
/// The room for what was found.
const BODY: usize = OUTPUT - NOTES;
/// The longest query taken, in characters.
const QUERY: usize = 1_000;
/// Matching exchanges shown by default, and at most.
const SEARCH_LIMIT: (usize, usize) = (8, 30);
/// Conversations listed by default, and at most.
const LIST_LIMIT: (usize, usize) = (20, 200);

pub(super) struct Tools {
    settings: Settings,
    store: Store,
    /// What ranked searches keep between them: which sessions changed, told by the kernel
    /// (only those are stat'ed again), and the sessions turns changed, read beside the index.
    warm: recall::Warm,
}

/// The tools, as `tools/list` describes them to the model.
pub(super) fn list() -> Value {
    let filters = json!({
        "cwd": {"type": "string", "description": "Only conversations started in this folder or below it: an absolute path, or \"here\" for the folder the agent works in."},
        "engine": {"type": "string", "description": "Only conversations started with this engine: \"claude\", \"gemini\", or another configured one."},
        "since": {"type": "string", "description": "Only what was said since this date: 2026-11-21, \"2026-11-21 10:15\", RFC 3339, or a time ago such as 30m (minutes), 12h, 3d, 2w, 2mo, 1y."},
    });
    let mut search_props = json!({
        "query": {"type": "string", "description": "What to find, in plain words (a question as you would ask it): exchanges are ranked by how well they match, no word is required, \"quoted words\" count more found together. Or a regular expression when regex is true."},
        "regex": {"type": "boolean", "description": "Treat query as one regular expression (Rust syntax; smart case: case is ignored unless it has an upper-case letter), matched line by line, newest first: for exact patterns.", "default": false},
        "until": {"type": "string", "description": "Only what was said until this date (same forms as since)."},
        "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_LIMIT.1, "description": format!("How many matching exchanges to return (default {}, at most {}).", SEARCH_LIMIT.0, SEARCH_LIMIT.1)},
    });
    let mut list_props = json!({
        "limit": {"type": "integer", "minimum": 1, "maximum": LIST_LIMIT.1, "description": format!("How many conversations to list (default {}, at most {}).", LIST_LIMIT.0, LIST_LIMIT.1)},
    });
    for props in [&mut search_props, &mut list_props] {
        props
            .as_object_mut()
            .expect("an object")
            .extend(filters.as_object().expect("an object").clone());
    }
    json!([
        {
            "name": "search",
            "title": "Search past conversations",
            "description": "Search every conversation the user has kept with cca (all folders, all engines) for what was said: past solutions, decisions, error messages, commands. Returns the best matching exchanges, best first, each with its rank and score, conversation id, date, title, and an excerpt of the question and answer. Use `read` with the id and exchange number to see all of one.",
            "inputSchema": {"type": "object", "properties": search_props, "required": ["query"], "additionalProperties": false},
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        },
        {
            "name": "read",
            "title": "Read a past conversation",
            "description": "Read one kept conversation, whole or a range of its exchanges (numbered from 1), by the id that search or list gave, or by its name. Long conversations come in parts, and an exchange longer than one answer in pieces: the answer says what is left and how to ask for it.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The conversation's id (such as 20261121-101500), a unique start of one, or its name."},
                    "from": {"type": "integer", "minimum": 1, "description": "The first exchange to read (default 1)."},
                    "to": {"type": "integer", "minimum": 1, "description": "The last exchange to read (default: the last one)."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Characters of the first exchange to skip, to read on in one longer than an answer may be (default 0): the answer that cut it says which offset to ask for."},
                },
                "required": ["id"],
                "additionalProperties": false,
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        },
        {
            "name": "list",
            "title": "List recent conversations",
            "description": "List the user's kept conversations, most recently active first: id, name, last activity, number of exchanges, engine, folder and title. Use it to find a conversation by when or where it happened; use search to find one by what was said.",
            "inputSchema": {"type": "object", "properties": list_props, "additionalProperties": false},
            "annotations": {"readOnlyHint": true, "openWorldHint": false},
        },
    ])
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchArgs {
    query: String,
    #[serde(default)]
    regex: bool,
    cwd: Option<String>,
    engine: Option<String>,
    since: Option<String>,
    until: Option<String>,
    limit: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    id: String,
    from: Option<u64>,
    to: Option<u64>,
    offset: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    cwd: Option<String>,
    engine: Option<String>,
    since: Option<String>,
    limit: Option<usize>,
}

impl Tools {
    pub(super) fn new(settings: Settings, store: Store) -> Tools {
        Tools { settings, store, warm: recall::Warm::default() }
    }

    /// Runs a tool: its text, or an error text for the model; `None` when there is no such tool.
    pub(super) fn call(&self, name: &str, arguments: &Value) -> Option<Result<String, String>> {
        // What is echoed back passes through `safe_text`, which drops control characters: one
        // in an argument would be searched for and not shown, so it is refused (tabs and line
        // ends, spaces between words, aside).
        let control = arguments.as_object().into_iter().flatten().find_map(|(field, value)| {
            let c = value
                .as_str()?
                .chars()
                .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))?;
            Some((field, c))
        });
        let result = match (name, control) {
            ("search" | "read" | "list", Some((field, c))) => Err(format!(
                "{name}: `{field}` holds a control character (U+{:04X}), which cannot be shown back; leave it out",
                u32::from(c)
            )),
            _ => self.dispatch(name, arguments)?,
        };
        Some(result.map(|t| safe_text(&t)).map_err(|t| safe_text(&t)))
    }

    fn dispatch(&self, name: &str, arguments: &Value) -> Option<Result<String, String>> {
        let result = match name {
            "search" => args(name, arguments).and_then(|a| self.search(a)),
            "read" => args(name, arguments).and_then(|a| self.read(a)),
            "list" => args(name, arguments).and_then(|a| self.list(a)),
            _ => return None,
        };
        Some(result)
    }

    // -----------------------------------------------------------------------------------------
    // search

    fn search(&self, a: SearchArgs) -> Result<String, String> {
        let query = a.query.trim();
        if query.is_empty() {
            return Err("search: `query` is empty; give words to find, or a regular expression with \"regex\": true".into());
        }
        if query.chars().count() > QUERY {
            return Err(format!(
                "search: the query is longer than {QUERY} characters; search for a few distinctive words"
            ));
        }
        let limit = limit("search", a.limit, SEARCH_LIMIT)?;
        if !a.regex {
            return self.ranked(query.to_string(), a, limit);
        }
        let matcher = Matcher::new(query, &PatternOptions { case: Case::Smart, fixed: false, word: false })
            .map_err(|why| format!("search: cannot search for `{query}`: {why}. Patterns are Rust regular expressions; or leave out \"regex\" to search for the words"))?;
        let (since, until) = self.span(&a)?;
        let opts = Options { since, until, ..Options::default() };
        let (engine, note) = crate::session::engine_filter(&self.store, a.engine.as_deref());
        let filter = Filter { cwd: cwd(a.cwd.as_deref())?, engine };
        let mut ids = self.store.session_ids().map_err(|e| format!("search: {e:#}"))?;
        // Newest first: what was said last is likeliest to be what the agent needs.
        ids.sort_by_cached_key(|id| std::cmp::Reverse(store::sort_key(id)));
        let job =
            Job { store: &self.store, matcher: &matcher, opts: &opts, filter: &filter, words: &[] };
        let searched = job.run(&ids, limit);
        let found: Vec<(&Found, &Hit)> = searched
            .sessions
            .iter()
            .flat_map(|f| f.hits.iter().rev().filter(|h| job.qualifies(h)).map(move |h| (f, h)))
            .collect();
        let what = format!("the pattern `{query}`");
        Ok(noted(note, self.found(&what, &found, limit, &searched, ids.len())))
    }

    /// A search in plain words: the best exchanges by `crate::recall`'s rank, each with its
    /// rank and score, as many as fit.
    fn ranked(&self, query: String, a: SearchArgs, limit: usize) -> Result<String, String> {
        let (since, until) = self.span(&a)?;
        let (engine, note) = crate::session::engine_filter(&self.store, a.engine.as_deref());
        let filter = recall::Filter {
            folder: cwd(a.cwd.as_deref())?,
            engine,
            since: since.map(|t| t.timestamp()),
            until: until.map(|t| t.timestamp()),
        };
        // One more than asked, to tell whether there were more.
        let notes = Notes::default();
        let found = recall::recall(
            &self.store,
            Some(&self.warm),
            &query,
            &filter,
            limit + 1,
            self.settings.now(),
            &notes,
        )
        .map_err(|e| format!("search: {}", message(&e)))?;
        let mut out = String::new();
        if found.is_empty() {
            let sessions = self.store.session_ids().map_or(0, |ids| ids.len());
            let why = recall::why_nothing_can_be_found(&query).map(|why| format!(": {why}"));
            let _ = writeln!(
                out,
                "Nothing found for \"{query}\" in {}{}.",
                conversations(sessions),
                why.unwrap_or_default()
            );
            out.push_str(
                "Try other words, a regular expression (\"regex\": true), or fewer filters.\n",
            );
            return Ok(noted(note, notes.before(out)));
        }
        let _ = writeln!(
            out,
            "Best matching exchanges for \"{query}\", best first: ranked by how well the words match each exchange's question, answer and conversation title (BM25, words matched by their stem) and by closeness in meaning (word vectors), recent ones slightly ahead."
        );
        let mut shown = 0;
        for (rank, f) in found.iter().take(limit).enumerate() {
            let session =
                Found { id: f.session.clone(), header: f.header.clone(), hits: Vec::new() };
            let hit = Hit {
                turn: f.exchange,
                at: f.at.clone(),
                lines: f.excerpt.lines().skip(1).map(str::to_string).collect(),
                words: 0,
            };
            let texts = self.excerpts(&f.session, &[f.exchange]);
            // An attempt that failed and the exchange after it share a number: the one found.
            let of_kind: Vec<Excerpt> = texts
                .into_iter()
                .filter(|e| {
                    e.answer.as_ref().is_some_and(|a| a.kind == Kind::Assistant) == f.answered
                })
                .collect();
            let lines: Vec<String> = f.excerpt.lines().map(str::to_string).collect();
            let texts = attempt_holding(&of_kind, f.exchange, &lines);
            let mut block = format!(
                "\n#{} · score {:.2}{}",
                rank + 1,
                f.score,
                excerpt_block(&session, &hit, texts, true)
            );
            if !f.also_in.is_empty() {
                let _ = writeln!(
                    block,
                    "[the same exchange, word for word, is also in {}]",
                    f.also_in.join(", ")
                );
            }
            if out.len() + block.len() > BODY {
                break;
            }
            out.push_str(&block);
            shown += 1;
        }
        let left = found.len().min(limit) - shown;
        if left > 0 {
            let _ = writeln!(
                out,
                "\n[{left} more matching exchanges not shown: the answer is limited to {OUTPUT} characters. Ask with a smaller limit, or read a conversation by id.]"
            );
        }
        if found.len() > limit {
            let _ = writeln!(
                out,
                "\n[More matching exchanges than the limit of {limit}: ask with a larger limit (at most {}), other words, since/until, cwd or engine.]",
                SEARCH_LIMIT.1
            );
        }
        Ok(noted(note, notes.before(out)))
    }

    /// The answer to a search: the first `limit` exchanges found, each with its excerpt, as
    /// many as fit, and notes of what was left out.
    fn found(
        &self,
        what: &str,
        found: &[(&Found, &Hit)],
        limit: usize,
        searched: &Searched,
        sessions: usize,
    ) -> String {
        let mut out = String::new();
        if found.is_empty() {
            let _ = writeln!(out, "Nothing found for {what} in {}.", conversations(searched.done));
            out.push_str("Try fewer or other words, a regular expression (\"regex\": true), or fewer filters.\n");
        } else {
            let _ = writeln!(out, "Matching exchanges for {what}, newest first:");
        }
        let mut shown = 0;
        let mut cut_short = false;
        let mut excerpts: BTreeMap<&str, Vec<Excerpt>> = BTreeMap::new();
        let mut last_session = None;
        for (session, hit) in found.iter().take(limit) {
            if !excerpts.contains_key(session.id.as_str()) {
                // Only the exchanges shown are read.
                let wanted: Vec<u64> = found
                    .iter()
                    .take(limit)
                    .filter(|(f, _)| f.id == session.id)
                    .map(|(_, h)| h.turn)
                    .collect();
                excerpts.insert(&session.id, self.excerpts(&session.id, &wanted));
            }
            let texts = excerpts
                .get(session.id.as_str())
                .and_then(|e| attempt_holding(e, hit.turn, &hit.lines));
            let first_of_session = last_session != Some(session.id.as_str());
            last_session = Some(session.id.as_str());
            let block = excerpt_block(session, hit, texts, first_of_session);
            if out.len() + block.len() > BODY {
                cut_short = true;
                break;
            }
            out.push_str(&block);
            shown += 1;
        }
        let left = found.len().min(limit) - shown;
        if cut_short {
            let _ = writeln!(
                out,
                "\n[{left} more matching exchanges not shown: the answer is limited to {OUTPUT} characters. Ask with a smaller limit, narrower words, or read a conversation by id.]"
            );
        }
        if found.len() > limit {
            let _ = writeln!(
                out,
                "\n[More matching exchanges than the limit of {limit}: ask with a larger limit (at most {}), more words, since/until, cwd or engine.]",
                SEARCH_LIMIT.1
            );
        }
        if searched.done < sessions {
            let _ = writeln!(
                out,
                "[Searched the newest {} of {} conversations; older ones were not searched once enough was found.]",
                searched.done, sessions
            );
        }
        if searched.unreadable > 0 {
            let _ = writeln!(
                out,
                "[{} could not be read and {} skipped.]",
                conversations(searched.unreadable),
                if searched.unreadable == 1 { "was" } else { "were" }
            );
        }
        out
    }

    /// The question and answer of some exchanges of a session, for excerpts: those numbered
    /// `turns`, each attempt at one (a failed or interrupted answer, and the question it
    /// answered) apart, as an attempt shares its number with the exchange after it.
    fn excerpts(&self, id: &str, turns: &[u64]) -> Vec<Excerpt> {
        let Ok((_, records, _)) = self.records(id, |turn| turns.contains(&turn), |_| 64 * 1024)
        else {
            return Vec::new();
        };
        let mut out: Vec<Excerpt> = Vec::new();
        for r in records {
            match r.kind {
                Kind::User => out.push(Excerpt { turn: r.turn, question: Some(r), answer: None }),
                Kind::Assistant | Kind::Failed | Kind::Interrupted => {
                    match out.last_mut().filter(|e| e.turn == r.turn && e.answer.is_none()) {
                        Some(e) => e.answer = Some(r),
                        None => out.push(Excerpt { turn: r.turn, question: None, answer: Some(r) }),
                    }
                }
                _ => {}
            }
        }
        out
    }

    // -----------------------------------------------------------------------------------------
    // read

    fn read(&self, a: ReadArgs) -> Result<String, String> {
        let id = self.store.resolve_id(a.id.trim()).map_err(|e| {
            format!("read: {}. Use the id that search or list gave (such as 20261121-101500), or a conversation's name.", message(&e))
        })?;
        let from = a.from.unwrap_or(1).max(1);
        let to = a.to.unwrap_or(u64::MAX);
        let offset = a.offset.unwrap_or(0);
        if to < from {
            return Err(format!("read: `to` ({to}) is before `from` ({from})"));
        }
        // The first exchange is read far enough to show what follows `offset`; the others
        // only as far as an answer could show.
        let cap = |turn| {
            if turn == from { offset.saturating_add(OUTPUT).saturating_mul(4) } else { OUTPUT * 4 }
        };
        let (header, records, exchanges) = self
            .records(&id, |turn| (from..=to).contains(&turn), cap)
            .map_err(|e| format!("read: {}", message(&e)))?;
        let mut out = String::new();
        let _ = writeln!(out, "{}", session_line(&id, &header));
        let _ = writeln!(out, "{} in all.", exchanges_word(exchanges));
        // Past the last answered exchange there may be a question asked since, unanswered
        // (its answer failed, or is being written): it is read as search names it.
        if from > exchanges.max(1) && records.is_empty() {
            let _ =
                writeln!(out, "[There is no exchange {from}: this conversation has {exchanges}.]");
            return Ok(out);
        }
        let shown = exchange_texts(&records);
        // What stopped the answer short: the exchange to read on from, and where in it.
        let mut cut = None;
        for (i, (turn, text)) in shown.iter().enumerate() {
            let (turn, mut text) = (*turn, text.as_str());
            let skipped = if i == 0 { offset } else { 0 };
            if skipped > 0 {
                let chars = text.chars().count();
                let Some((at, _)) = text.char_indices().nth(skipped) else {
                    let _ = writeln!(
                        out,
                        "\n[Exchange {turn} has {chars} characters: there is nothing from offset {skipped}.]"
                    );
                    return Ok(out);
                };
                text = &text[at..];
                let _ = writeln!(out, "\n[Exchange {turn}, from character {skipped}:]");
            }
            let room = BODY.saturating_sub(out.len());
            if text.len() > room {
                if i > 0 {
                    cut = Some((turn, 0));
                } else {
                    // One exchange longer than an answer may be: as much as fits, and where
                    // to read on, so that reading on always gets further.
                    let kept: String = text.chars().take(room.saturating_sub(300)).collect();
                    out.push_str(&kept);
                    cut = Some((turn, skipped + kept.chars().count()));
                }
                break;
            }
            out.push_str(text);
        }
        match cut {
            Some((turn, 0)) => {
                let _ = writeln!(
                    out,
                    "\n[Exchanges {turn} to {exchanges} not shown (the answer is limited to {OUTPUT} characters): read again with from={turn}.]"
                );
            }
            Some((turn, offset)) => {
                let _ = writeln!(
                    out,
                    "\n[cut: exchange {turn} is longer than one answer may be ({OUTPUT} characters): read on with from={turn}, offset={offset}.]"
                );
            }
            None if to < exchanges => {
                let _ = writeln!(out, "\n[Exchanges {} to {exchanges} not asked for.]", to + 1);
            }
            None => {}
        }
        Ok(out)
    }

    /// The records of the exchanges of a session that `wanted` takes, each with at most `cap`
    /// bytes of its content, and the session's header and number of exchanges.
    fn records(
        &self,
        id: &str,
        wanted: impl Fn(u64) -> bool,
        cap: impl Fn(u64) -> usize,
    ) -> anyhow::Result<(Header, Vec<Text>, u64)> {
        let path = self.store.session_path(id);
        let file = self.store.open_transcript(&path)?;
        let mut numbering = Numbering::default();
        let mut header = None;
        let mut spans = Vec::new();
        let scanned =
            Scanner::scan(BufReader::with_capacity(256 * 1024, &file), |event| match event {
                Event::Header(h, _) => header = Some(h),
                Event::Problem(_) => numbering.problem(),
                Event::PartlyRead(_) | Event::Note { .. } => {}
                // An answer with no question is no exchange's, and never sent: left out.
                Event::Record(span) if numbering.stray(span.kind) => {}
                Event::Record(span) => {
                    let turn = numbering.record(span.kind);
                    if wanted(turn) {
                        spans.push((turn, span.kind, span.meta, span.content));
                    }
                }
            })
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        if let Err(e) = scanned {
            return Err(store::not_transcript(&path, id, e));
        }
        let header = header.expect("a scan that succeeded saw the header");
        let exchanges = numbering.exchanges();
        let mut out = Vec::with_capacity(spans.len());
        for (turn, kind, meta, content) in spans {
            let cap = cap(turn);
            let text = read_content(&file, &content, cap)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            let whole = content.end - content.start;
            out.push(Text { turn, kind, meta, text, whole, partial: whole > cap as u64 });
        }
        Ok((header, out, exchanges))
    }

    // -----------------------------------------------------------------------------------------
    // list

    fn list(&self, a: ListArgs) -> Result<String, String> {
        let limit = limit("list", a.limit, LIST_LIMIT)?;
        let since = self.date("since", a.since.as_deref(), false)?;
        let here = cwd(a.cwd.as_deref())?;
        let (engine, note) = crate::session::engine_filter(&self.store, a.engine.as_deref());
        let mut listed = self.store.listing().map_err(|e| format!("list: {}", message(&e)))?;
        // One that cannot be read has no folder, engine or time to match: said, not hidden.
        let unreadable = listed.iter().filter(|l| l.unreadable.is_some()).count();
        let unreadable = match unreadable {
            0 => String::new(),
            1 => "[1 conversation could not be read and is not listed: `cca doctor` names it.]\n"
                .to_string(),
            n => format!(
                "[{n} conversations could not be read and are not listed: `cca doctor` names them.]\n"
            ),
        };
        listed.retain(|l| {
            l.unreadable.is_none()
                && here.as_ref().is_none_or(|here| Path::new(&l.cwd).starts_with(here))
                && engine.as_ref().is_none_or(|e| &l.engine == e)
                && since.is_none_or(|since| {
                    DateTime::parse_from_rfc3339(&l.last_activity)
                        .is_ok_and(|t| t.to_utc() >= since)
                })
        });
        listed.sort_by_cached_key(|l| {
            std::cmp::Reverse((l.last_activity.clone(), store::sort_key(&l.id)))
        });
        let mut out = String::new();
        if listed.is_empty() {
            out.push_str("No conversations match.\n");
            out.push_str(&unreadable);
            return Ok(noted(note, out));
        }
        let count = match listed.len() {
            1 => "1 conversation".to_string(),
            n => format!("{n} conversations"),
        };
        let _ = writeln!(out, "{count}, most recently active first:");
        let mut shown = 0;
        for l in listed.iter().take(limit) {
            let name = l.name.as_deref().map(|n| format!(" · name {n}")).unwrap_or_default();
            let line = format!(
                "{}{name} · last active {} · {} · {} · folder {} · {}\n",
                l.id,
                l.last_activity,
                exchanges_word(l.turns),
                l.engine,
                l.cwd,
                quoted_title(&l.title),
            );
            if out.len() + line.len() > BODY {
                break;
            }
            out.push_str(&line);
            shown += 1;
        }
        if shown < listed.len() {
            let _ = writeln!(
                out,
                "[{} more not listed: ask with since, cwd or engine, or a larger limit (at most {}).]",
                listed.len() - shown,
                LIST_LIMIT.1
            );
        }
        out.push_str(&unreadable);
        Ok(out)
    }

    /// A search's `since` and `until` ([`crate::human::parse_span`]).
    fn span(&self, a: &SearchArgs) -> Result<crate::human::Span, String> {
        let (since, until) = (a.since.as_deref(), a.until.as_deref());
        crate::human::parse_span(since, until, self.settings.now(), ["since", "until"])
            .map_err(|e| format!("search: {}", message(&e)))
    }

    fn date(
        &self,
        field: &str,
        text: Option<&str>,
        end_of_day: bool,
    ) -> Result<Option<DateTime<Utc>>, String> {
        text.map(|t| crate::human::parse_date(t, self.settings.now(), end_of_day))
            .transpose()
            .map_err(|e| format!("`{field}`: {}", message(&e)))
    }
}

/// Notes from recall (an index rebuilt, a session that cannot be read and so is not searched,
/// results that leave out the latest changes) go to the server's stderr, and into the search's
/// result, where the agent reads them.
#[derive(Default)]
struct Notes(std::sync::Mutex<Vec<String>>);

impl Notes {
    /// `text` after the notes said, each on a line of its own.
    fn before(self, text: String) -> String {
        let notes = self.0.into_inner().unwrap_or_else(|e| e.into_inner());
        notes.iter().map(|n| format!("[Note: {n}]\n")).chain([text]).collect()
    }
}

impl recall::Progress for Notes {
    fn note(&self, text: &str) {
        crate::front::terminal::say(&format!("cca: note: {text}"));
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(text.to_string());
    }

    fn reading(&self, _: usize, _: usize) {}

    fn finished(&self) {}
}

/// A tool's arguments, or an error that says what was wrong with them, in the words of the
/// tool's input schema (serde's own name Rust types, such as `usize`, and not the argument).
fn args<T: for<'de> Deserialize<'de>>(tool: &str, arguments: &Value) -> Result<T, String> {
    let arguments = if arguments.is_null() { &json!({}) } else { arguments };
    let tools = list();
    let schema = tools
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == tool))
        .map(|t| &t["inputSchema"]);
    let arguments = &whole_numbers(schema, arguments);
    if let Some(schema) = schema {
        against_schema(schema, arguments).map_err(|e| format!("{tool}: {e}"))?;
    }
    let given: serde_json::Map<String, Value> = match arguments.as_object() {
        Some(given) => given
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        None => serde_json::Map::new(),
    };
    T::deserialize(Value::Object(given)).map_err(|e| {
        format!("{tool}: bad arguments: {e}. See the tool's input schema for what it takes.")
    })
}

/// `arguments` with each number written with a fraction of zero (`2.0`, as some clients send
/// every number) made the integer it is wherever `schema` takes an integer: JSON has one kind
/// of number, and JSON Schema counts `2.0` an integer.
fn whole_numbers(schema: Option<&Value>, arguments: &Value) -> Value {
    let mut arguments = arguments.clone();
    if let (Some(schema), Some(given)) = (schema, arguments.as_object_mut()) {
        for (key, value) in given.iter_mut() {
            let whole = value
                .as_f64()
                .filter(|n| value.is_f64() && n.fract() == 0.0 && n.abs() < 2f64.powi(53));
            if let Some(n) = whole.filter(|_| schema["properties"][key]["type"] == "integer") {
                *value = json!(n as i64);
            }
        }
    }
    arguments
}

/// What is wrong with `arguments` by a tool's input `schema`: not an object, an argument it
/// does not take, a required one missing, or one of the wrong kind or below its minimum. A
/// `null` is an argument not given, as models send them.
fn against_schema(schema: &Value, arguments: &Value) -> Result<(), String> {
    let empty = serde_json::Map::new();
    let properties = schema["properties"].as_object().unwrap_or(&empty);
    let takes = || properties.keys().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    let Some(given) = arguments.as_object() else {
        return Err(format!(
            "the arguments are {}, not an object of {}",
            kind_of(arguments),
            takes()
        ));
    };
    for (name, value) in given.iter().filter(|(_, v)| !v.is_null()) {
        let Some(property) = properties.get(name) else {
            return Err(format!("`{name}` is not one of its arguments; it takes {}", takes()));
        };
        let wanted = property["type"].as_str().unwrap_or_default();
        let fits = match wanted {
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "integer" => value.is_i64() || value.is_u64(),
            _ => true,
        };
        if !fits {
            return Err(format!("`{name}` must be {}, not {}", a(wanted), kind_of(value)));
        }
        if let (Some(least), Some(n)) = (property["minimum"].as_f64(), value.as_f64())
            && n < least
        {
            return Err(format!("`{name}` must be at least {least}, not {value}"));
        }
    }
    let required = schema["required"].as_array().map(Vec::as_slice).unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        if given.get(name).is_none_or(Value::is_null) {
            return Err(format!("`{name}` is missing; it takes {}", takes()));
        }
    }
    Ok(())
}

/// A JSON value's kind, as a schema names it, with its article.
fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(_) => a("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => a("integer"),
        Value::Number(_) => a("number"),
        Value::String(_) => a("string"),
        Value::Array(_) => a("array"),
        Value::Object(_) => a("object"),
    }
}

fn a(kind: &str) -> String {
    let article = if kind.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    format!("{article} {kind}")
}

fn limit(
    tool: &str,
    asked: Option<usize>,
    (default, most): (usize, usize),
) -> Result<usize, String> {
    match asked {
        None => Ok(default),
        Some(0) => Err(format!("{tool}: `limit` must be at least 1")),
        Some(n) if n > most => {
            Err(format!("{tool}: `limit` is at most {most}; narrow the request instead"))
        }
        Some(n) => Ok(n),
    }
}

/// The folder filter: "here" is the folder `cca mcp` runs in (the agent's project).
fn cwd(asked: Option<&str>) -> Result<Option<PathBuf>, String> {
    match asked.map(str::trim) {
        None | Some("") => Ok(None),
        Some("here" | ".") => {
            crate::session::current_dir().map(Some).map_err(|e| format!("`cwd`: {e:#}"))
        }
        Some(path) if Path::new(path).is_absolute() => {
            crate::session::named_folder(Path::new(path))
                .map(Some)
                .map_err(|e| format!("`cwd`: {e:#}"))
        }
        Some(path) => {
            Err(format!("`cwd`: `{path}` is not an absolute path; give one, or \"here\""))
        }
    }
}

/// A tool's text, after a note on what it was asked (an engine no conversation was held with).
fn noted(note: Option<String>, text: String) -> String {
    match note {
        Some(note) => format!("[Note: {note}.]\n{text}"),
        None => text,
    }
}

/// "1 conversation", "2 conversations".
fn conversations(n: usize) -> String {
    if n == 1 { "1 conversation".into() } else { format!("{n} conversations") }
}

/// An error's message and hint, as one text for a model.
fn message(e: &anyhow::Error) -> String {
    crate::error::with_hint(e)
}

/// Reads at most `cap` bytes of a record's content, unescaped, cut at a character.
fn read_content(file: &File, content: &Range<u64>, cap: usize) -> std::io::Result<String> {
    let len = ((content.end - content.start) as usize).min(cap);
    let mut stored = vec![0; len];
    file.read_exact_at(&mut stored, content.start)?;
    let mut text = Vec::with_capacity(len);
    let mut escaper = MarkerEscaper::new(Direction::Unescape);
    escaper.push(&stored, &mut text);
    escaper.finish(&mut text);
    Ok(match String::from_utf8(text) {
        Ok(text) => text,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    })
}

/// Each exchange's records as `read` shows them, one text an exchange, in order.
fn exchange_texts(records: &[Text]) -> Vec<(u64, String)> {
    let mut shown: Vec<(u64, String)> = Vec::new();
    for r in records {
        if shown.last().is_none_or(|(turn, _)| *turn != r.turn) {
            shown.push((r.turn, String::new()));
        }
        let Some((_, text)) = shown.last_mut() else { continue };
        let _ = write!(text, "\n── {} ──\n{}", record_heading(r), r.text);
        if !r.text.ends_with('\n') {
            text.push('\n');
        }
        if r.partial {
            let _ = writeln!(text, "[cut here: this record holds {} bytes]", r.whole);
        }
    }
    shown
}

fn exchanges_word(n: u64) -> String {
    if n == 1 { "1 exchange".into() } else { format!("{n} exchanges") }
}

/// Of the attempts at exchange `turn` (`texts`), the one that holds the lines found; else the
/// last, the exchange itself.
fn attempt_holding<'a>(texts: &'a [Excerpt], turn: u64, lines: &[String]) -> Option<&'a Excerpt> {
    let attempts = || texts.iter().filter(move |e| e.turn == turn);
    let found: Vec<&str> =
        lines.iter().map(|l| l.trim().trim_matches('…').trim()).filter(|l| !l.is_empty()).collect();
    let holds = |e: &&Excerpt| {
        let texts = [&e.question, &e.answer];
        found.iter().any(|l| texts.iter().any(|t| t.as_ref().is_some_and(|t| t.text.contains(l))))
    };
    attempts().find(holds).or_else(|| attempts().next_back())
}
