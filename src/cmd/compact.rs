//! `cca compact` (and `/compact` in `cca chat`): a session's older turns summarised now.

use anyhow::Result;

use super::clear::said_note;
use crate::cli::CompactArgs;
use crate::config::{Flags, Settings};
use crate::error::exit;
use crate::front::signals;
use crate::front::terminal::{Spinner, say, say_waiting, spinner_wanted};
use crate::human::human_bytes;
use crate::run::{Cancel, Interrupted, Progress};
use crate::session::{self, settings};
use crate::store::Store;

/// `cca compact`
pub(crate) fn run(args: &CompactArgs) -> Result<u8> {
    let (settings, store) = settings(&Flags { fail_fast: args.fail_fast, ..Flags::default() })?;
    let id = session::chosen(&settings, &store, args.session.id.as_deref())?;
    compact_session(&settings, &store, &id, args.keep)
}

/// Summarises a session's older turns now, saying how it went on stderr: `cca compact`, and
/// `/compact` in `cca chat`.
pub(super) fn compact_session(
    settings: &Settings,
    store: &Store,
    id: &str,
    keep: Option<u64>,
) -> Result<u8> {
    let _lock = store.lock(id, true, || say_waiting(id))?;
    let summary = session::repaired_summary(settings, store, id, said_note)?;
    let (engine, model) = session::engine_and_model(settings, &summary.header, false)?;
    let ctx = session::Session { settings, store, id, engine, model: model.as_deref() };
    let mut spinner = Spinner::default();
    if spinner_wanted(settings) {
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
            Progress::Text(_) | Progress::ToolStarted(_) | Progress::Steer(_) => {}
        });
    spinner.clear();
    match compacted {
        Ok(Some(c)) => {
            say(&format!(
                "cca: {} of {id} {} now a summary: {} -> {} of context",
                crate::human::turns(c.first, c.through),
                if c.first == c.through { "is" } else { "are" },
                human_bytes(c.bytes_before),
                human_bytes(c.bytes_after)
            ));
            Ok(exit::OK)
        }
        Ok(None) => {
            say(&format!(
                "cca: nothing to compact in {id}: it has {} live exchange(s), and the last {keep} are kept",
                summary.live.exchanges.len()
            ));
            Ok(exit::OK)
        }
        Err(e) => match e.downcast_ref::<Interrupted>() {
            Some(Interrupted(why)) => {
                say("cca: interrupted; nothing changed");
                Ok(why.exit_code())
            }
            None => Err(e.context(format!("compaction of {id} failed; nothing changed"))),
        },
    }
}
