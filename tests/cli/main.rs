//! Integration tests: the built `cca` against fake engines, one module per area.

mod common;
mod help;
mod readme;
mod safety;
mod search;
mod sessions;
mod shell;
mod signals;
mod terminal;
