//! `cca path`: a session's file path, for an editor.

use anyhow::Result;

use super::print;
use crate::cli::PathArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::session::{self, settings};

/// `cca path`
pub(crate) fn run(args: &PathArgs) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    let id = session::chosen(&settings, &store, args.session.id.as_deref())?;
    print(&format!("{}\n", store.session_path(&id).display()))?;
    Ok(exit::OK)
}
