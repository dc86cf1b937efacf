//! This machine as the remote knows it: a random id, and a name other machines say.

use anyhow::{Result, bail};

use super::record::hash;
use crate::error::Failure;

/// A random id for this machine on the remote.
pub(super) fn new_machine_id() -> String {
    let seed = format!(
        "{}-{}-{:?}",
        host_name(),
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default()
    );
    hash(seed.as_bytes())[..12].to_string()
}

/// A machine's name as `--name` gives it: what other machines say ("continued on NAME") and
/// name forks after, so a word of one line, shown whole.
pub(super) fn machine_name(name: &str) -> Result<()> {
    let fits = (1..=MACHINE_NAME_MAX).contains(&name.chars().count());
    if fits && !name.trim().is_empty() && !name.chars().any(crate::render::moves_the_terminal) {
        return Ok(());
    }
    bail!(Failure::usage(format!("{} is not a machine name", crate::render::shown_id(name))).hint(
        format!("give a name of 1 to {MACHINE_NAME_MAX} characters, on one line: --name laptop")
    ))
}

const MACHINE_NAME_MAX: usize = 64;

/// This machine's host name.
pub(super) fn host_name() -> String {
    let name = rustix::system::uname().nodename().to_string_lossy().into_owned();
    if name.is_empty() { "this-machine".to_string() } else { name }
}
