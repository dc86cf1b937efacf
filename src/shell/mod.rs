//! Shell code printed by `cca init SHELL`, never written into the user's files.

use crate::cli::InitShell;

pub(crate) fn init(shell: InitShell) -> &'static str {
    match shell {
        InitShell::Bash => include_str!("init.bash"),
        InitShell::Zsh => include_str!("init.zsh"),
        InitShell::Fish => include_str!("init.fish"),
    }
}
