//! `cca sessions`: the sessions, newest first, as lines or JSON for scripts.

use anyhow::Result;
use serde_json::json;

use super::print;
use crate::cli::SessionsArgs;
use crate::config::{Flags, Settings};
use crate::error::exit;
use crate::front::terminal::say;
use crate::session::{self, settings};
use crate::store;
use crate::transcript;

/// `cca sessions`
pub(crate) fn run(args: &SessionsArgs) -> Result<u8> {
    let SessionsArgs { json: json_output, limit, here, .. } = *args;
    let since = args.since.as_deref();
    let (settings, store) = settings(&Flags::default())?;
    let (engine, note) = session::engine_filter(&store, args.engine.as_deref());
    if let Some(note) = note {
        say(&format!("cca: {note}"));
    }
    let engine = engine.as_deref();
    let since = since.map(|d| crate::human::parse_date(d, settings.now(), false)).transpose()?;
    let here = if here { Some(session::current_dir()?) } else { None };
    let mut listed = store.listing()?;
    let stored = listed.len();
    if here.is_some() || engine.is_some() || since.is_some() {
        // A transcript that cannot be read has no folder, engine or time to match.
        listed.retain(|l| {
            l.unreadable.is_none()
                && here.as_ref().is_none_or(|here| std::path::Path::new(&l.cwd).starts_with(here))
                && engine.is_none_or(|e| l.engine == e)
                && since.is_none_or(|since| {
                    chrono::DateTime::parse_from_rfc3339(&l.last_activity)
                        .is_ok_and(|t| t.to_utc() >= since)
                })
        });
    }
    store::newest_first(&mut listed);
    let matched = listed.len();
    listed.truncate(limit.unwrap_or(usize::MAX));
    let followed = session::followed(&settings, &store).ok();
    if json_output {
        let items: Vec<_> = listed
            .iter()
            .map(|l| {
                json!({
                    "id": l.id,
                    "path": store.session_path(&l.id).to_string_lossy(),
                    "title": l.title,
                    "name": l.name,
                    "cwd": l.cwd,
                    "created": l.created,
                    "last_activity": l.last_activity,
                    "turns": l.turns,
                    "engine": l.engine,
                    "model": l.model,
                    "prompt": l.prompt,
                    "forked_from": l.forked_from,
                    "usage": {
                        "input_tokens": l.totals.input_tokens,
                        "output_tokens": l.totals.output_tokens,
                        "cost_usd": l.totals.cost_usd,
                        "left_out": l.totals.left_out,
                    },
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
    if listed.is_empty() && stored > 0 {
        say(&empty_because(
            stored,
            matched,
            [
                ("--here", here.is_some()),
                ("--engine", engine.is_some()),
                ("--since", since.is_some()),
            ],
        ));
        return Ok(exit::OK);
    }
    if listed.is_empty() {
        say("cca: no sessions yet; start one with `cca search \"your question\"`");
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
                transcript::one_line(&l.engine, 40),
                describe(l)
            ),
        };
        out.push_str(&line);
    }
    print(&out)?;
    Ok(exit::OK)
}

/// A session's name and title, and whence it was forked.
fn describe(l: &store::Listed) -> String {
    let mut text = String::new();
    if let Some(name) = &l.name {
        text.push_str(&format!("{} · ", transcript::one_line(name, 40)));
    }
    if let Some(from) = &l.forked_from {
        let from_session = crate::render::shown_id(&from.session);
        text.push_str(&format!("(fork of {from_session} at {}) ", from.turn));
    }
    text + &transcript::one_line(&l.title, 70)
}

/// Why a list of `stored` sessions came out empty: the filters given (none matched), or `-n 0`.
fn empty_because<const N: usize>(
    stored: usize,
    matched: usize,
    filters: [(&str, bool); N],
) -> String {
    if matched > 0 {
        return "cca: `-n 0` lists no sessions; `-n N` lists the newest N".to_string();
    }
    let given: Vec<&str> = filters.iter().filter(|f| f.1).map(|f| f.0).collect();
    let filter =
        format!("{} {}", if given.len() == 1 { "filter" } else { "filters" }, given.join(", "));
    match stored {
        1 => format!("cca: the only session does not match the {filter}"),
        n => format!("cca: none of the {n} sessions matches the {filter}"),
    }
}

/// The token estimate of the session's engine (its `bytes_per_token`), or the default one for
/// an engine no longer configured.
pub(super) fn estimate_tokens(settings: &Settings, engine: &str, bytes: u64) -> u64 {
    match settings.engines.get(engine) {
        Some(engine) => engine.tokens(bytes),
        None => (bytes as f64 / crate::engine::BYTES_PER_TOKEN).ceil() as u64,
    }
}

/// An RFC 3339 time as local `YYYY-MM-DD HH:MM`, with the format parsed once by the caller.
pub(super) fn local_time_with(rfc3339: &str, format: &[chrono::format::Item]) -> String {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .map(|t| t.with_timezone(&chrono::Local).format_with_items(format.iter()).to_string())
        .unwrap_or_else(|_| rfc3339.to_string())
}
