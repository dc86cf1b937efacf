//! The few errors `main` must tell apart, and the exit codes they map to.
//!
//! Everything else is an `anyhow::Error` with context naming the path or command; it exits 1.
//! Errors are printed once, by the front end (`front::terminal::report`), as `cca: error: ...`
//! and optional `hint: ...` lines.

use std::fmt;

/// Exit codes, as documented in docs/REFERENCE.md and the man page.
pub(crate) mod exit {
    pub(crate) const OK: u8 = 0;
    /// The engine failed, or any other error.
    pub(crate) const ERROR: u8 = 1;
    /// Bad arguments or input: nothing was sent to an engine.
    pub(crate) const USAGE: u8 = 2;
    /// The session is busy in another terminal and `--no-wait` was given (EX_TEMPFAIL).
    pub(crate) const BUSY: u8 = 75;
    /// Interrupted by Ctrl-C (128 + SIGINT); cca then dies by SIGINT itself.
    pub(crate) const CTRL_C: u8 = 130;
}

/// An error with its own exit code and a hint saying what to do next.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
    pub hint: Option<String>,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure { code, message: message.into(), hint: None }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(exit::USAGE, message)
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

/// The hint an error carries: that of the first [`Failure`] in its chain, if it has one.
pub(crate) fn hint_of(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|c| c.downcast_ref::<Failure>()).and_then(|f| f.hint.clone())
}

/// An error and its hint as one line of text: `message (hint)`, for a reader with no room for a
/// hint line of its own (a model, a list of problems).
pub(crate) fn with_hint(e: &anyhow::Error) -> String {
    match hint_of(e) {
        Some(hint) => format!("{e:#} ({hint})"),
        None => format!("{e:#}"),
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}
