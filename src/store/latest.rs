//! The `latest` link: the session a bare `,` continues, set by each turn, read back only when
//! it names a session file in the sessions folder, and moved on when its session is removed.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::{Failure, exit};

use super::Store;
use super::files::{read_regular, replace_file};
use super::ids::{file_name, id_from_file_name};

/// The most a `latest` of the text-file form holds: a session file's name, with room.
const LONGEST_NAME: u64 = 4096;

impl Store {
    /// Points `latest` at a session, atomically: readers see the old or the new link, never none.
    pub(crate) fn set_latest(&self, id: &str) -> Result<()> {
        let dir = self.sessions_dir();
        let link = self.latest_path();
        for attempt in 0u32.. {
            let temp = dir.join(format!(".latest-{}-{attempt}", std::process::id()));
            match std::os::unix::fs::symlink(file_name(id), &temp) {
                Ok(()) => {
                    return fs::rename(&temp, &link).with_context(|| {
                        let _ = fs::remove_file(&temp);
                        format!("cannot update {}", link.display())
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 100 => continue,
                Err(e) if e.kind() == io::ErrorKind::Unsupported || e.raw_os_error() == Some(1) => {
                    // No symlinks here (EPERM on some file systems): a text file with the name.
                    return replace_file(&link, file_name(id).as_bytes());
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("cannot create a link in {}", dir.display()));
                }
            }
        }
        unreachable!("the loop returns")
    }

    /// The session `latest` points at; `None` when there is no session yet.
    pub(crate) fn latest(&self) -> Result<Option<String>> {
        let link = self.latest_path();
        let target = match fs::read_link(&link) {
            Ok(target) => target,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // Not a symlink: the text-file form, a session file's name (a file far longer
            // is none, and is not read whole nor echoed).
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
                let size = fs::metadata(&link).map_or(0, |m| m.len());
                if size > LONGEST_NAME {
                    return Err(Failure::new(
                        exit::ERROR,
                        format!(
                            "{} is neither a link nor a session file's name ({} bytes)",
                            link.display(),
                            size
                        ),
                    )
                    .hint(format!(
                        "remove it (`rm {}`); the next turn makes it again",
                        crate::human::shell_word(&link.to_string_lossy())
                    ))
                    .into());
                }
                let text = read_regular(&link)
                    .with_context(|| format!("cannot read {}", link.display()))?;
                PathBuf::from(String::from_utf8_lossy(&text).trim())
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", link.display())),
        };
        let bad = |why: &str| {
            Failure::new(
                exit::ERROR,
                format!("{} points to `{}`, {why}", link.display(), target.display()),
            )
            .hint("start a new session with `cca search QUESTION`, or give a session's id (`cca sessions` lists them)")
        };
        // An absolute link (made by hand, or by another tool) is as good when it points into
        // this folder.
        let name = match (target.parent(), target.file_name()) {
            (Some(dir), Some(name)) if target.is_absolute() && self.is_sessions_dir(dir) => {
                Path::new(name)
            }
            // `./session_ID.md`: the same folder.
            (Some(dir), Some(name)) if dir == Path::new(".") => Path::new(name),
            _ => target.as_path(),
        };
        let Some(id) = name.to_str().and_then(id_from_file_name) else {
            return Err(bad("which is not a session file in this folder").into());
        };
        match fs::metadata(self.session_path(&id)) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return Err(bad("which is not a regular file").into()),
            Err(_) => return Err(bad("which does not exist").into()),
        }
        Ok(Some(id))
    }

    fn is_sessions_dir(&self, dir: &Path) -> bool {
        let sessions = self.sessions_dir();
        dir == sessions
            || matches!((dir.canonicalize(), sessions.canonicalize()), (Ok(a), Ok(b)) if a == b)
    }

    /// What `latest` names, without checking it.
    pub(super) fn latest_target(&self) -> Option<String> {
        match fs::read_link(self.latest_path()) {
            Ok(target) => Some(target.to_string_lossy().into_owned()),
            Err(_) => super::files::read_at_most(&self.latest_path(), LONGEST_NAME)
                .ok()
                .map(|t| String::from_utf8_lossy(&t).trim().to_string()),
        }
    }

    /// Points `latest` at the newest remaining session (the first `cca sessions` lists), or
    /// removes it when none is left.
    pub(super) fn repoint_latest(&self) -> Result<Repointed> {
        let mut listed = self.listing()?;
        super::listing::newest_first(&mut listed);
        // A session that cannot be read is no conversation to continue, unless it is all there is.
        let newest = listed.iter().find(|l| l.unreadable.is_none()).or(listed.first());
        match newest.map(|l| l.id.clone()) {
            Some(newest) => self.set_latest(&newest).map(|()| Repointed::To(newest)),
            None => match fs::remove_file(self.latest_path()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e)
                    .with_context(|| format!("cannot remove {}", self.latest_path().display())),
                _ => Ok(Repointed::Nowhere),
            },
        }
    }
}

/// What became of `latest` when a session was removed.
#[derive(Debug, PartialEq)]
pub(crate) enum Repointed {
    /// It pointed at another session, and still does.
    No,
    /// It pointed at the removed session and now points at this one.
    To(String),
    /// It pointed at the removed session, and no session is left.
    Nowhere,
}
