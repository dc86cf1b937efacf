//! `cca compact` (and `/compact` in `cca chat`): a session's older turns summarised now.

use anyhow::Result;

use crate::cli::CompactArgs;
use crate::config::{Flags, Settings};
use crate::error::exit;
use crate::front::signals;
use crate::front::terminal::{Spinner, say, say_waiting, spinner_wanted};
use crate::run::{Cancel, Interrupted};
use crate::session::{self, settings};
use crate::store::Store;
use crate::turn::Event;

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
    let keep = keep.unwrap_or(settings.compaction.keep_recent);
    let cancel = Cancel::new();
    let _signals = signals::route_to(&cancel)?;
    let mut spinner = Spinner::default();
    let compacted = crate::turn::compact(
        settings,
        store,
        id,
        keep,
        &mut |event: Event| match event {
            Event::Waiting { session } => say_waiting(session),
            Event::Notice { text, .. } => say(&format!("cca: {text}")),
            Event::Started { engine } if spinner_wanted(settings) => {
                spinner.start(&format!("waiting for {engine} to summarise"))
            }
            Event::EngineOutput(bytes) => spinner.stderr(bytes),
            Event::Retry(note) => spinner.stderr(format!("{note}\n").as_bytes()),
            Event::Stopping => spinner.clear(),
            _ => {}
        },
        &cancel,
    );
    spinner.clear();
    match compacted {
        Ok(done) => {
            say(&format!("cca: {}", done.sentence(Some(id))));
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
