//! `cca clear`: the next turn of a session sends nothing from before ([`session::clear`]).

use anyhow::Result;

use crate::cli::ClearArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::front::terminal::{say, say_waiting};
use crate::session::{self, settings};

/// `cca clear`
pub(crate) fn run(args: &ClearArgs) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, args.session.id.as_deref())?;
    match session::clear(&settings, &store, &id, || say_waiting(&id), said_note)? {
        true => say(&format!(
            "cca: cleared {id}: its next turn starts without the history (the file keeps it)"
        )),
        false => say(&format!(
            "cca: {id} has nothing to clear: its next turn sends no history already; nothing changed"
        )),
    }
    Ok(exit::OK)
}

/// Says the note of a cut-off record repaired before a clear or a compaction.
pub(super) fn said_note(note: &str) {
    say(&format!("cca: {note}"));
}
