//! Session locks: one writer at a time per session (std `File::lock` on a file under
//! `locks/`), waiting when asked to and saying so, and giving up when the turn is cancelled.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;

use anyhow::{Context, Result};

use crate::error::{Failure, exit};

use super::{FILE_MODE, Store};

impl Store {
    /// Held while an import reads and writes `imports.json` and the sessions it makes, so
    /// that two (two hooks firing at once) never import one conversation twice.
    pub(crate) fn lock_imports(&self, on_wait: impl FnOnce()) -> Result<SessionLock> {
        self.lock(".imports", true, on_wait)
    }

    /// Held while a name is checked and given, so two sessions cannot take the same name.
    pub(crate) fn lock_names(&self, on_wait: impl FnOnce()) -> Result<SessionLock> {
        // Not a session id (ids never start with a dot), so never a session's lock.
        self.lock(".names", true, on_wait)
    }

    /// Takes the session's lock, the one writer allowed at a time. If another cca holds it,
    /// `on_wait` is called (to say so) and this waits, unless `wait` is false.
    pub(crate) fn lock(&self, id: &str, wait: bool, on_wait: impl FnOnce()) -> Result<SessionLock> {
        self.lock_unless(id, wait, on_wait, || Ok(()))
    }

    /// Like [`Self::lock`], but while waiting, gives up with `stop`'s error as soon as it
    /// returns one (the turn was cancelled).
    pub(crate) fn lock_unless(
        &self,
        id: &str,
        wait: bool,
        on_wait: impl FnOnce(),
        stop: impl Fn() -> Result<()>,
    ) -> Result<SessionLock> {
        self.ensure()?;
        let path = self.locks_dir().join(format!("{id}.lock"));
        let open = || {
            OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(FILE_MODE)
                .open(&path)
                .with_context(|| format!("cannot open the lock {}", path.display()))
        };
        let mut file = open()?;
        let mut reopened = 0u32;
        let mut on_wait = Some(on_wait);
        loop {
            match file.try_lock() {
                // `cca rm` removes a session's lock file: one locked after that is no lock the
                // next cca would see. Held only while the name still names it; else opened
                // again (made anew) and waited for as any other.
                Ok(()) if is_named(&file, &path) => return Ok(SessionLock { _file: file }),
                Ok(()) => {
                    file = open()?;
                    // At once the first time; after that (the file replaced again and again),
                    // as any other wait.
                    reopened += 1;
                    if reopened == 1 {
                        continue;
                    }
                }
                Err(fs::TryLockError::WouldBlock) => {}
                Err(fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("cannot lock {}", path.display()));
                }
            }
            if !wait {
                return Err(Failure::new(
                    exit::BUSY,
                    format!("session {id} is busy: another cca is answering in it"),
                )
                .hint("try again when it is done, or leave out --no-wait to wait for it")
                .into());
            }
            if let Some(say) = on_wait.take() {
                say();
            }
            stop()?;
            // Polled rather than blocked on, so that a cancel is noticed while waiting.
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
    }
}

/// Whether `path` names the file `file` has open (the same inode on the same device).
fn is_named(file: &File, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(held), Ok(named)) => held.ino() == named.ino() && held.dev() == named.dev(),
        _ => false,
    }
}

/// Held while a session is being read and appended to; released on drop.
#[derive(Debug)]
pub(crate) struct SessionLock {
    _file: File,
}
