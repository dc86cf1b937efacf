//! Showing long output through a pager, and writing to a reader that may go away.

use std::io::{self, Write};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// The pager when `PAGER` is not set.
pub(crate) const DEFAULT_PAGER: &str = "less -FRX";

/// Set for [`DEFAULT_PAGER`] only: what cca shows is UTF-8 whatever the locale, and less
/// without a UTF-8 locale would show `·` as `<C2><B7>`. A `PAGER` of the user's own is run as
/// it is.
const DEFAULT_PAGER_ENV: (&str, &str) = ("LESSCHARSET", "utf-8");

/// Shows what `write` writes through a pager (`$PAGER`, else [`DEFAULT_PAGER`]), or directly on
/// stdout if none runs. `write` is handed the output in pieces, so nothing needs to be held
/// whole; when the reader quits before reading it all (q in less), writing stops, and that is
/// not an error. Other errors of `write` (reading what it shows) are.
pub(crate) fn page(
    pager: Option<&str>,
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    let name = pager.unwrap_or(DEFAULT_PAGER);
    let mut command = match pager {
        Some(pager) => pager_command(pager),
        None => {
            let mut command = pager_command(DEFAULT_PAGER);
            command.env(DEFAULT_PAGER_ENV.0, DEFAULT_PAGER_ENV.1);
            command
        }
    };
    let spawned = command.stdin(Stdio::piped()).spawn().ok();
    let Some(mut child) = spawned else {
        return written(write, io::stdout().lock(), |_| Ok(()));
    };
    let shown = match child.stdin.take() {
        Some(stdin) => written(write, stdin, |_| Ok(())),
        None => Ok(()),
    };
    let status = child.wait().context("cannot wait for the pager")?;
    shown?;
    // Quitting early (q in less) ends a pager well; one that fails (`PAGER=false`, an option
    // it does not know) may have shown nothing, and that is said.
    if !status.success() {
        return Err(crate::error::Failure::new(
            crate::error::exit::ERROR,
            format!("the pager `{name}` failed ({status}), so what it was given may not have been shown"),
        )
        .hint("set PAGER to a pager that works (PAGER=cat shows everything at once), or pipe cca's output")
        .into());
    }
    Ok(())
}

/// The pager run the way git runs it: a command with shell syntax or spaces (`less -R`,
/// `sed 's/^/> /' | less`) through `sh -c`, a bare program name directly.
fn pager_command(pager: &str) -> Command {
    const SHELL_SYNTAX: &str = "|&;<>()$`\\\"' \t\n*?[#~=%";
    if pager.contains(|c| SHELL_SYNTAX.contains(c)) {
        let mut command = Command::new("sh");
        command.arg("-c").arg(pager);
        command
    } else {
        Command::new(pager)
    }
}

/// Runs `write` on `out` (buffered), and tells its own errors from those of `out`: an error
/// writing to `out` goes to `gone` (the reader went away, or stdout failed), and writing stops.
pub(crate) fn written<W: Write>(
    write: impl FnOnce(&mut dyn Write) -> Result<()>,
    out: W,
    gone: impl FnOnce(io::Error) -> Result<()>,
) -> Result<()> {
    let mut out = Watched { inner: io::BufWriter::with_capacity(64 * 1024, out), failed: None };
    let result = write(&mut out).and_then(|()| out.flush().map_err(anyhow::Error::from));
    match (result, out.failed.take()) {
        (Err(_), Some(e)) => gone(e),
        (result, _) => result,
    }
}

/// A writer that remembers its first error, so that the caller can tell it from others.
struct Watched<W: Write> {
    inner: W,
    failed: Option<io::Error>,
}

impl<W: Write> Write for Watched<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf).inspect_err(|e| self.remember(e))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().inspect_err(|e| self.remember(e))
    }
}

impl<W: Write> Watched<W> {
    fn remember(&mut self, e: &io::Error) {
        if self.failed.is_none() {
            self.failed = Some(io::Error::new(e.kind(), e.to_string()));
        }
    }
}
