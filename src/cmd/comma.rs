//! `cca ,`: a question in the followed session, as `cca search --resume` asks it.

use anyhow::Result;

use crate::cli::AskArgs;
use crate::turn::Target;

/// `cca ,`
pub(crate) fn run(args: &AskArgs) -> Result<u8> {
    let target = args.session.clone().map_or(Target::Resume, Target::Session);
    super::search::search(args, target)
}
