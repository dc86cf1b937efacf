//! `cca __engine` (hidden): runs an engine for cca and ends it when cca ends (`run::launch`).

use anyhow::Result;

use crate::cli::EngineArgs;

/// `cca __engine PARENT -- PROGRAM ARGS...`
pub(crate) fn run(args: &EngineArgs) -> Result<u8> {
    crate::run::launch(args.parent, &args.command)
}
