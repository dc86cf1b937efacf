//! `cca name`: a short name for a session, kept in its header and usable wherever an id is.

use anyhow::Result;

use crate::cli::NameArgs;
use crate::config::Flags;
use crate::error::{Failure, exit};
use crate::front::terminal::{say, say_waiting};
use crate::session::{self, settings};
use crate::store;
use crate::transcript::Header;

/// `cca name [ID] NAME`, `cca name --clear [ID]`
pub(crate) fn run(args: &NameArgs) -> Result<u8> {
    let (first, second, clear) = (args.id.as_deref(), args.name.as_deref(), args.clear);
    let (settings, store) = settings(&Flags::default())?;
    // One word is the name (for the followed session); two are the session and the name.
    let (target, new_name) = match (first, second, clear) {
        (target, None, true) => (target, None),
        (_, Some(_), true) => {
            return Err(Failure::usage("`cca name --clear` takes only the session")
                .hint("cca name --clear ID")
                .into());
        }
        (Some(target), Some(name), false) => (Some(target), Some(name)),
        (Some(name), None, false) | (None, Some(name), false) => (None, Some(name)),
        (None, None, false) => {
            return Err(Failure::usage("give the session a name")
                .hint("cca name rust-locks (the followed session), or cca name ID rust-locks")
                .into());
        }
    };
    if let Some(name) = new_name {
        store::validate_name(name)?;
    }
    let id = session::chosen(&settings, &store, target)?;
    // The session's lock first: naming another session never waits for a turn in this one.
    let _lock = store.lock(&id, true, || say_waiting(&id))?;
    let _names = store.lock_names(|| say("cca: another cca is naming a session; waiting…"))?;
    let summary = store.summarize(&id)?;
    if let Some(name) = new_name {
        if name != id && store.session_path(name).is_file() {
            return Err(Failure::usage(format!("`{name}` is the id of another session"))
                .hint("choose another name")
                .into());
        }
        let taken =
            store.listing()?.into_iter().find(|l| l.id != id && l.name.as_deref() == Some(name));
        if let Some(other) = taken {
            return Err(Failure::usage(format!(
                "the name `{name}` is taken by session {}",
                other.id
            ))
            .hint(format!(
                "take it away first (`cca name --clear {}`), or choose another",
                other.id
            ))
            .into());
        }
    }
    if summary.header.name.as_deref() != new_name {
        let header = Header { name: new_name.map(String::from), ..summary.header.clone() };
        store.rewrite_header(&id, &header, summary.header_end)?;
    }
    match new_name {
        Some(name) => say(&format!(
            "cca: {id} is named {name}; use it wherever an id goes (`cca show {name}`)"
        )),
        None => say(&format!("cca: {id} has no name now")),
    }
    Ok(exit::OK)
}
