//! `cca acp`: serves editors over the Agent Client Protocol (`front::acp`), with the settings
//! the options choose.

use anyhow::Result;

use crate::cli::AnswerArgs;
use crate::session;

/// `cca acp`
pub(crate) fn run(args: &AnswerArgs) -> Result<u8> {
    let (settings, store) = session::settings(&super::flags(args))?;
    crate::front::acp::serve(settings, store)
}
