//! Front ends: how a person or a program sees a turn. Each is an observer over the one library
//! call per turn (`turn::ask`), and turns what it shows into output, exit codes and cancels.
//! `terminal` serves `cca search`, `,` (also with `--json` and `-q`) and `cca chat`; `acp` serves
//! editors over the Agent Client Protocol (`cca acp`), with `wire` as its stdin and stdout.

pub mod acp;
pub mod signals;
pub mod terminal;
pub mod wire;
