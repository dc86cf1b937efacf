//! `cca mcp`: serves the kept conversations to agents over the Model Context Protocol
//! (`front::mcp`), with the settings and store every command resolves.

use anyhow::Result;

use crate::cli::McpArgs;
use crate::config::Flags;
use crate::session::settings;

/// `cca mcp`
pub(crate) fn run(_: &McpArgs) -> Result<u8> {
    let (settings, store) = settings(&Flags::default())?;
    crate::front::mcp::serve(settings, store)
}
