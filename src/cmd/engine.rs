//! `cca __standby` (hidden): keeps an engine waiting for the next one-shot turn
//! (`run::standby`).

use anyhow::Result;

/// `cca __standby`, its order on stdin.
pub(crate) fn standby() -> Result<()> {
    crate::run::standby::serve_stdin()
}
