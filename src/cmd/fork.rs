//! `cca fork`: a new session from the first exchanges of another ([`session::fork`]).

use anyhow::Result;

use super::print;
use crate::cli::ForkArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::front::terminal::{say, say_waiting};
use crate::session::{self, settings};

/// `cca fork`
pub(crate) fn run(args: &ForkArgs) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let source = session::chosen(&settings, &store, args.session.id.as_deref())?;
    let new = session::fork(&settings, &store, &source, args.at, || say_waiting(&source))?;
    print(&format!("{new}\n"))?;
    say(&format!("cca: forked {source} into {new}; it is now the latest session"));
    if let Some(note) = session::still_followed_note(&settings, &new) {
        say(&format!("cca: {note}"));
    }
    Ok(exit::OK)
}
