//! `cca man`: prints cca(1), written from the clap definition and docs/REFERENCE.md.

use anyhow::Result;
use clap::CommandFactory;

use super::print;
use crate::cli::{Cli, ManArgs};
use crate::error::exit;

/// `cca man`
pub(crate) fn run(_: &ManArgs) -> Result<u8> {
    print(&crate::manpage::render(&Cli::command(), crate::manpage::REFERENCE))?;
    Ok(exit::OK)
}
