//! Integration tests: the built `cca` against fake engines, one module per area.

// Shared with tests/real; each binary uses part of it.
mod acp;
mod acp_files;
mod acp_handshake;
mod acp_queue;
mod acp_sessions;
mod acp_signals;
mod acp_usage;
mod acp_wire;
mod auto;
#[allow(dead_code)]
#[path = "../support/env.rs"]
mod common;
mod compaction;
mod export;
mod faults;
mod grep;
mod help;
mod import;
mod layers;
mod live;
mod mcp;
mod readme;
mod recall;
mod safety;
mod search;
mod sessions;
mod setup;
mod shell;
mod signals;
mod standby;
mod standby_faults;
mod steer;
mod sync;
mod sync_killed;
mod sync_remote;
mod terminal;
