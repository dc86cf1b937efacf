//! Front ends: how a person or a program sees a turn. Each is an observer over the one library
//! call per turn (`turn::ask`), and turns what it shows into output, exit codes and cancels.
//! `terminal` serves `cca search`, `,` (also with `--json` and `-q`) and `cca chat`; `acp` serves
//! editors over the Agent Client Protocol (`cca acp`), with `wire` as its stdin and stdout;
//! `mcp` serves agents the kept conversations over the Model Context Protocol (`cca mcp`);
//! `slash` tells a slash command from a message, for chat and editors alike.

pub(crate) mod acp;
pub(crate) mod content;
pub(crate) mod mcp;
pub(crate) mod signals;
pub(crate) mod slash;
pub(crate) mod terminal;
pub mod wire;
