//! `cca __engine` (hidden): runs an engine for cca and ends it when cca ends (`run::launch`);
//! `cca __standby` (hidden): keeps one waiting for the next one-shot turn (`run::standby`).

use anyhow::Result;

use crate::cli::EngineArgs;

/// `cca __engine PARENT -- PROGRAM ARGS...`
pub(crate) fn run(args: &EngineArgs) -> Result<u8> {
    crate::run::launch(args.parent, &args.command)
}

/// `cca __standby`, its order on stdin.
pub(crate) fn standby() -> Result<()> {
    crate::run::standby::serve_stdin()
}
