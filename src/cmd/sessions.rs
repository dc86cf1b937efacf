//! Steering sessions: `sessions`, `show`, `path`, `fork`, `clear`, `rm`, `restore`.
//! Everything is recorded in the transcripts themselves; nothing here talks to an engine.

use std::io::{IsTerminal, Read};

use anyhow::{Context, Result};
use serde_json::json;

use super::print;
use crate::config::{Flags, Settings};
use crate::error::{Failure, exit};
use crate::front::signals;
use crate::front::terminal::{Spinner, say_waiting, spinner_wanted};
use crate::human::human_bytes;
use crate::run::{Cancel, Interrupted, Progress};
use crate::session::{self, settings};
use crate::store::{self, Appender, Store};
use crate::transcript::{self, Header, Kind, Meta, Record, Transcript};

/// `cca sessions`
pub fn list(json_output: bool, limit: Option<usize>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let mut listed = store.listing()?;
    listed.sort_by_cached_key(|l| {
        std::cmp::Reverse((l.last_activity.clone(), store::sort_key(&l.id)))
    });
    listed.truncate(limit.unwrap_or(usize::MAX));
    let followed = session::followed(&settings, &store).ok();
    if json_output {
        let items: Vec<_> = listed
            .iter()
            .map(|l| {
                json!({
                    "id": l.id,
                    "path": store.session_path(&l.id),
                    "title": l.title,
                    "created": l.created,
                    "last_activity": l.last_activity,
                    "turns": l.turns,
                    "engine": l.engine,
                    "model": l.model,
                    "prompt": l.prompt,
                    "forked_from": l.forked_from,
                    "live_bytes": l.live_bytes,
                    "live_tokens_estimate": estimate_tokens(&settings, &l.engine, l.live_bytes),
                    "full_bytes": l.full_bytes,
                    "problems": l.problems,
                    "unreadable": l.unreadable,
                    "followed": followed.as_deref() == Some(l.id.as_str()),
                })
            })
            .collect();
        print(&format!("{}\n", serde_json::Value::Array(items)))?;
        return Ok(exit::OK);
    }
    if listed.is_empty() {
        eprintln!("cca: no sessions yet; start one with `cca search \"your question\"`");
        return Ok(exit::OK);
    }
    let width = listed.iter().map(|l| l.id.len()).max().unwrap_or(0);
    let when =
        chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M").parse().expect("a valid format");
    let mut out = String::new();
    for l in &listed {
        let mark = if followed.as_deref() == Some(l.id.as_str()) { '*' } else { ' ' };
        let line = match &l.unreadable {
            Some(why) => format!("{mark} {:<width$}  unreadable: {why}\n", l.id),
            None => format!(
                "{mark} {:<width$}  {}  {:>3} {}  {:<7} {}\n",
                l.id,
                local_time_with(&l.last_activity, &when),
                l.turns,
                if l.turns == 1 { "turn " } else { "turns" },
                l.engine,
                transcript::one_line(&l.title, 70)
            ),
        };
        out.push_str(&line);
    }
    print(&out)?;
    Ok(exit::OK)
}

/// The token estimate of the session's engine (its `bytes_per_token`), or the default one for
/// an engine no longer configured.
fn estimate_tokens(settings: &Settings, engine: &str, bytes: u64) -> u64 {
    match settings.engines.get(engine) {
        Some(engine) => engine.tokens(bytes),
        None => (bytes as f64 / crate::engine::BYTES_PER_TOKEN).ceil() as u64,
    }
}

fn local_time(rfc3339: &str) -> String {
    let when =
        chrono::format::StrftimeItems::new("%Y-%m-%d %H:%M").parse().expect("a valid format");
    local_time_with(rfc3339, &when)
}

/// An RFC 3339 time as local `YYYY-MM-DD HH:MM`, with the format parsed once by the caller.
fn local_time_with(rfc3339: &str, format: &[chrono::format::Item]) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.with_timezone(&chrono::Local).format_with_items(format.iter()).to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}

/// `cca show`
pub fn show(id: Option<&str>, raw: bool) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, id)?;
    let mut text = String::new();
    store
        .open_session(&id)?
        .read_to_string(&mut text)
        .with_context(|| format!("cannot read {}", store.session_path(&id).display()))?;
    let out = if raw {
        text
    } else {
        let (t, problems) = transcript::parse(&text).map_err(|e| {
            Failure::new(
                exit::ERROR,
                format!(
                    "{} is not a transcript cca can read ({e})",
                    store.session_path(&id).display()
                ),
            )
            .hint("`cca show --raw` prints it as it is")
        })?;
        // The live size, from the text already read: one read of the file, one version of it.
        let live_bytes = match transcript::summarize(text.as_bytes()) {
            Ok(Ok(summary)) => summary.live.bytes(),
            _ => 0,
        };
        let bold = settings.color && std::io::stdout().is_terminal();
        let live = (live_bytes, estimate_tokens(&settings, &t.header.engine, live_bytes));
        let mut out = readable(&t, live, text.len() as u64, bold);
        for p in problems {
            out.push_str(&format!("\n(line {}: {})\n", p.line, p.message));
        }
        out
    };
    // A dumb terminal cannot run less; a pager the user named is still theirs to choose.
    if std::io::stdout().is_terminal() && (!settings.dumb_terminal || settings.pager.is_some()) {
        crate::run::page(&out, settings.pager.as_deref())?;
    } else {
        print(&out)?;
    }
    Ok(exit::OK)
}

/// The conversation for a person: no markers, clear separators, every record visible.
pub fn readable(
    t: &Transcript,
    (live_bytes, live_tokens): (u64, u64),
    full_bytes: u64,
    bold: bool,
) -> String {
    let h = &t.header;
    let mut out = format!("{}\n", if h.title.is_empty() { "(untitled)" } else { &h.title });
    out.push_str(&format!(
        "session {} · {}{} · prompt {} · started {}\n",
        h.id,
        h.engine,
        h.model.as_ref().map(|m| format!(" ({m})")).unwrap_or_default(),
        h.prompt,
        local_time(&h.created)
    ));
    if let Some(f) = &h.forked_from {
        out.push_str(&format!("forked from {} at turn {}\n", f.session, f.turn));
    }
    out.push_str(&format!(
        "context sent next turn: {} (~{} tokens); the file: {}\n",
        human_bytes(live_bytes),
        live_tokens,
        human_bytes(full_bytes)
    ));
    let mut done = 0;
    for r in &t.records {
        let turn = done + 1;
        let title = match r.kind {
            Kind::User => format!("{turn}. You"),
            Kind::Attachment => {
                format!("attached: {}", r.meta.name.as_deref().unwrap_or("context"))
            }
            Kind::Assistant => {
                done += 1;
                let mut t = format!("{turn}. {}", r.meta.engine.as_deref().unwrap_or("answer"));
                if let Some(m) = &r.meta.model {
                    t.push_str(&format!(" ({m})"));
                }
                if let Some(ms) = r.meta.duration_ms {
                    t.push_str(&format!(" · {:.1} s", ms as f64 / 1000.0));
                }
                t
            }
            Kind::Failed => format!(
                "not answered, not sent again: {}",
                transcript::one_line(r.meta.reason.as_deref().unwrap_or("failed"), 120)
            ),
            Kind::Interrupted => format!(
                "interrupted, not sent again: {}",
                r.meta.reason.as_deref().unwrap_or("stopped")
            ),
            Kind::Clear => "context cleared here: nothing above is sent again".to_string(),
            Kind::Compaction => format!(
                "summary of turns {}–{}, sent in their place ({} → {})",
                r.meta.first.unwrap_or(1),
                r.meta.through.unwrap_or(0),
                human_bytes(r.meta.bytes_before.unwrap_or(0)),
                human_bytes(r.meta.bytes_after.unwrap_or(0))
            ),
        };
        let (on, off) = if bold { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
        out.push_str(&format!("\n{on}── {title} ──{off}\n"));
        if !r.content.is_empty() {
            out.push_str(&r.content);
            if !r.content.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

/// `cca path`
pub fn path(id: Option<&str>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, id)?;
    print(&format!("{}\n", store.session_path(&id).display()))?;
    Ok(exit::OK)
}

/// `cca fork`
pub fn fork(id: Option<&str>, at: Option<u64>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let source = session::chosen(&settings, &store, id)?;
    let new = fork_session(&settings, &store, &source, at)?;
    print(&format!("{new}\n"))?;
    eprintln!("cca: forked {source} into {new}; it is now the latest session");
    Ok(exit::OK)
}

/// Creates a session from the first `at` exchanges of `source` (all by default); returns its id.
pub fn fork_session(
    settings: &Settings,
    store: &Store,
    source: &str,
    at: Option<u64>,
) -> Result<String> {
    let _lock = store.lock(source, true, || say_waiting(source))?;
    let summary = store.summarize(source)?;
    let n = at.unwrap_or(summary.exchanges);
    if n > summary.exchanges {
        return Err(Failure::usage(format!(
            "session {source} has {} exchange(s); cannot fork at {n}",
            summary.exchanges
        ))
        .into());
    }
    let end = match n {
        0 => summary.header_end,
        n => summary.exchange_ends[n as usize - 1],
    };
    let mut body = vec![0u8; (end - summary.header_end) as usize];
    std::os::unix::fs::FileExt::read_exact_at(
        &store.open_session(source)?,
        &mut body,
        summary.header_end,
    )
    .with_context(|| format!("cannot read {}", store.session_path(source).display()))?;
    let body = String::from_utf8(body).context("the transcript is not UTF-8")?;
    let now = settings.now();
    let header = Header {
        created: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        forked_from: Some(transcript::ForkedFrom { session: source.to_string(), turn: n }),
        ..summary.header
    };
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    let id = store.create_session(&stamp, |id| {
        transcript::render_header(&Header { id: id.to_string(), ..header.clone() }) + &body
    })?;
    store.set_latest(&id)?;
    Ok(id)
}

/// `cca clear`
pub fn clear(id: Option<&str>) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, id)?;
    clear_session(&settings, &store, &id)?;
    eprintln!("cca: cleared {id}: its next turn starts without the history (the file keeps it)");
    Ok(exit::OK)
}

pub fn clear_session(settings: &Settings, store: &Store, id: &str) -> Result<()> {
    let _lock = store.lock(id, true, || say_waiting(id))?;
    let summary = store.summarize(id)?;
    let record = Record {
        kind: Kind::Clear,
        meta: Meta { at: Some(settings.now_string()), ..Meta::default() },
        content: String::new(),
    };
    Appender::open(store, id)?
        .append(transcript::render_record(&record, summary.exchanges + 1).as_bytes())
}

/// `cca compact`
pub fn compact(id: Option<&str>, keep: Option<u64>, fail_fast: bool) -> Result<u8> {
    let (settings, store) = settings(&Flags { fail_fast, ..Flags::default() })?;
    let id = session::chosen(&settings, &store, id)?;
    let _lock = store.lock(&id, true, || say_waiting(&id))?;
    let summary = store.summarize(&id)?;
    let (engine, model) = session::engine_and_model(&settings, &summary.header, false)?;
    let ctx = session::Session {
        settings: &settings,
        store: &store,
        id: &id,
        engine,
        model: model.as_deref(),
    };
    let mut spinner = Spinner::default();
    if spinner_wanted(&settings) {
        spinner.start(&format!("waiting for {} to summarise", engine.name));
    }
    let keep = keep.unwrap_or(settings.compaction.keep_recent);
    let cancel = Cancel::new();
    let _signals = signals::route_to(&cancel)?;
    let compacted =
        crate::compact::compact(&ctx, &summary, keep, &cancel, &mut |progress| match progress {
            Progress::Stderr(bytes) => spinner.stderr(bytes),
            Progress::Retry(note) => spinner.stderr(format!("{note}\n").as_bytes()),
            Progress::Tool(call) => spinner.stderr(format!("· {}\n", call.summary()).as_bytes()),
            Progress::Stopping => spinner.clear(),
            Progress::Text(_) | Progress::Steer(_) => {}
        });
    spinner.clear();
    match compacted {
        Ok(Some(c)) => {
            eprintln!(
                "cca: turns {}-{} of {id} are now a summary: {} -> {} of context",
                c.first,
                c.through,
                human_bytes(c.bytes_before),
                human_bytes(c.bytes_after)
            );
            Ok(exit::OK)
        }
        Ok(None) => {
            eprintln!(
                "cca: nothing to compact in {id}: it has {} live exchange(s), and the last {keep} are kept",
                summary.live.exchanges.len()
            );
            Ok(exit::OK)
        }
        Err(e) => match e.downcast_ref::<Interrupted>() {
            Some(Interrupted(why)) => {
                eprintln!("cca: interrupted; nothing changed");
                Ok(why.exit_code())
            }
            None => Err(e.context(format!("compaction of {id} failed; nothing changed"))),
        },
    }
}

/// `cca rm`
pub fn remove(ids: &[String], purge: bool) -> Result<u8> {
    let (_, store) = settings(&Flags::default())?;
    // Resolve all first: one bad id removes nothing.
    let ids: Vec<String> = ids.iter().map(|id| store.resolve_id(id)).collect::<Result<_>>()?;
    for id in &ids {
        let _lock = store.lock(id, true, || say_waiting(id))?;
        store.remove(id, purge)?;
        if purge {
            eprintln!("cca: deleted {id}");
        } else {
            eprintln!(
                "cca: moved {id} to {} (`cca restore {id}` brings it back)",
                store.trash_dir().display()
            );
        }
    }
    Ok(exit::OK)
}

/// `cca restore`
pub fn restore(ids: &[String]) -> Result<u8> {
    let (_, store) = settings(&Flags::default())?;
    if ids.is_empty() {
        let trash = store.trash_ids();
        if trash.is_empty() {
            eprintln!("cca: the trash is empty");
        } else {
            print(&trash.iter().map(|id| format!("{id}\n")).collect::<String>())?;
        }
        return Ok(exit::OK);
    }
    for id in ids {
        store.restore(id)?;
        eprintln!("cca: restored {id}");
    }
    Ok(exit::OK)
}
