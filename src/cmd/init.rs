//! `cca init`: prints the shell code that defines the `,` shortcut (`crate::shell`).

use anyhow::Result;

use super::print;
use crate::cli::InitArgs;
use crate::error::exit;

/// `cca init SHELL`
pub(crate) fn run(args: &InitArgs) -> Result<u8> {
    print(crate::shell::init(args.shell))?;
    Ok(exit::OK)
}
