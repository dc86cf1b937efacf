//! `cca standby`: the engines waiting for the next one-shot turn, and ending them.

use anyhow::Result;

use crate::cli::StandbyArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::human::human_bytes;
use crate::render::clean_text;
use crate::run::standby::{self, Status};
use crate::session;

/// `cca standby [--end] [--engine NAME]`
pub(crate) fn run(args: &StandbyArgs) -> Result<u8> {
    let (settings, store) = session::settings(&Flags::default())?;
    let dir = store.standby_dir();
    // A name no engine has is a mistake to say, not "nothing waits" (a standby of an engine
    // since removed from the config is still found by its socket's name).
    if let Some(name) = &args.engine
        && !settings.engines.contains_key(name)
        && !standby::kinds(&dir).contains(name)
    {
        anyhow::bail!(crate::config::unknown_engine(name, &settings.engines));
    }
    let mut out = String::new();
    if args.end {
        let ended = standby::end(&dir, args.engine.as_deref());
        match ended.is_empty() {
            true => out.push_str("nothing waited on standby\n"),
            false => out.push_str(&format!("ended: {}\n", ended.join(", "))),
        }
        super::print(&out)?;
        return Ok(exit::OK);
    }
    let waiting: Vec<Status> = standby::waiting(&dir)
        .into_iter()
        .filter(|w| args.engine.as_ref().is_none_or(|e| *e == w.kind))
        .collect();
    for w in &waiting {
        out.push_str(&format!("{}\n", describe(w)));
    }
    if waiting.is_empty() {
        out.push_str("nothing waits on standby\n");
        if settings.engines.values().all(|e| e.standby.is_none()) {
            out.push_str(
                "standby is off: `standby = \"10m\"` in config.toml leaves an engine waiting \
                 after each one-shot turn, for the next\n",
            );
        }
    }
    super::print(&out)?;
    Ok(exit::OK)
}

/// One waiting engine, on a line: `claude  in ~/src/app, 9m 40s left, 190 MB (group 4242)`.
/// What a standby reports is cleaned as `cca show` cleans a transcript: a folder's name can
/// hold any byte but `/` and NUL, terminal escapes included.
pub(super) fn describe(w: &Status) -> String {
    let left = w.idle_left.as_secs();
    let (kind, folder) = (clean_text(&w.kind), w.folder.to_string_lossy());
    let folder = clean_text(&folder);
    let (left, memory) = (format!("{}m {:02}s left", left / 60, left % 60), human_bytes(w.memory));
    match w.group {
        0 => format!("{kind:<8} in {folder}, {left}, starting"),
        group => {
            let state = if w.ready { "" } else { ", starting" };
            format!("{kind:<8} in {folder}, {left}, {memory}{state} (process group {group})")
        }
    }
}
