//! Integration tests: the built `cca` against fake engines, one module per area.

// Shared with tests/real; each binary uses part of it.
#[allow(dead_code)]
#[path = "../support/env.rs"]
mod common;
mod compaction;
mod help;
mod readme;
mod safety;
mod search;
mod sessions;
mod shell;
mod signals;
mod steer;
mod terminal;
