//! Unix sockets in a private folder of `CCA_HOME` (`run/` for steers, `standby/` for engines
//! waiting for a turn): made so that only this user reaches them, bound so that a connection
//! never meets a half-made one, and found by a path short enough for `sun_path`.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{DIR_MODE, FILE_MODE, make_private_dir, set_mode};
use crate::error::{Failure, exit};

/// A listening socket; removed from the file system when dropped.
#[derive(Debug)]
pub(crate) struct Socket {
    pub listener: UnixListener,
    name: String,
    dir: SocketDir,
    /// Handed on ([`Socket::keep`]): its file is not removed on drop.
    kept: bool,
}

impl Socket {
    /// Listens as `name` in the folder `dir`, which must be this user's (it is made 0700). A
    /// socket already there is replaced: the caller holds what makes it the only one (a session
    /// lock, a standby's lock), so that one is stale.
    pub(crate) fn listen(dir: &Path, name: &str) -> Result<Socket> {
        let opened = open_private_dir(dir)?;
        // Bound under a name of its own, then renamed into place once it listens: between
        // bind and listen a socket refuses connections, and a client then would be told that
        // nothing listens. The rename also replaces a stale socket.
        let staging = format!(".{name}.new");
        let path = dir.join(name);
        let staged = dir.join(&staging);
        match rustix::fs::unlinkat(&opened.file, &staging, rustix::fs::AtFlags::empty()) {
            Err(e) if e != rustix::io::Errno::NOENT => {
                return Err(io::Error::from(e))
                    .with_context(|| format!("cannot remove {}", staged.display()));
            }
            _ => {}
        }
        let listener = UnixListener::bind(opened.address(&staging))
            .with_context(|| format!("cannot listen on {}", staged.display()))?;
        set_mode(&staged, FILE_MODE)?;
        rustix::fs::renameat(&opened.file, &staging, &opened.file, name)
            .map_err(io::Error::from)
            .with_context(|| format!("cannot rename {} to {}", staged.display(), path.display()))?;
        Ok(Socket { listener, name: name.to_string(), dir: opened, kept: false })
    }

    /// The listener, for another process to serve: the socket file stays when this is dropped
    /// (that process removes it).
    pub(crate) fn keep(mut self) -> io::Result<UnixListener> {
        self.kept = true;
        self.listener.try_clone()
    }

    /// Connects to this socket (as a client would, through the same short address).
    pub(crate) fn connect(&self) -> io::Result<UnixStream> {
        UnixStream::connect(self.dir.address(&self.name))
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let _ = rustix::fs::unlinkat(&self.dir.file, &self.name, rustix::fs::AtFlags::empty());
    }
}

/// Makes the folder `dir` (0700) if it is not there, and opens it; it must be this user's.
pub(crate) fn open_private_dir(dir: &Path) -> Result<SocketDir> {
    make_private_dir(dir)?;
    let opened = SocketDir::open(dir).with_context(|| format!("cannot open {}", dir.display()))?;
    let meta = opened.file.metadata().with_context(|| format!("cannot read {}", dir.display()))?;
    check_private_dir(dir, &meta, rustix::process::geteuid().as_raw())?;
    if meta.permissions().mode() & 0o777 != DIR_MODE {
        opened
            .file
            .set_permissions(fs::Permissions::from_mode(DIR_MODE))
            .with_context(|| format!("cannot set the permissions of {}", dir.display()))?;
    }
    Ok(opened)
}

/// Connects to socket `name` in `dir`; `None` when nothing listens there (no socket, or a
/// stale one whose process died: connecting is refused).
pub(crate) fn connect(dir: &Path, name: &str) -> Result<Option<UnixStream>> {
    let connected =
        SocketDir::open(dir).and_then(|opened| UnixStream::connect(opened.address(name)));
    match connected {
        Ok(stream) => Ok(Some(stream)),
        Err(e)
            if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused) =>
        {
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| format!("cannot connect to {}", dir.join(name).display())),
    }
}

/// Whether a connection comes from this user. Another user cannot reach the socket through
/// its 0700 folder; this holds even if the folder's mode was changed.
pub(crate) fn peer_allowed(stream: &UnixStream, uid: u32) -> bool {
    rustix::net::sockopt::socket_peercred(stream).is_ok_and(|cred| cred.uid.as_raw() == uid)
}

/// The folder that holds sockets, kept open. A socket's path must fit in `sun_path` (108 bytes
/// with its NUL, `SUN_LEN`), which a long `CCA_HOME` passes; a path too long for it is given as
/// `/proc/self/fd/N/NAME`, which Linux resolves through the open folder. That needs no `chdir`,
/// which would race with the other threads of the process.
#[derive(Debug)]
pub(crate) struct SocketDir {
    file: File,
    path: PathBuf,
}

/// The longest path `sun_path` holds (108 bytes with the closing NUL).
const SUN_PATH_MAX: usize = 107;

impl SocketDir {
    /// Opens the folder itself, never a link in its place.
    fn open(path: &Path) -> io::Result<SocketDir> {
        use rustix::fs::OFlags;
        let file = OpenOptions::new()
            .read(true)
            .custom_flags((OFlags::DIRECTORY | OFlags::NOFOLLOW).bits() as i32)
            .open(path)?;
        Ok(SocketDir { file, path: path.to_path_buf() })
    }

    /// The address of socket `name` in this folder: its path, or a short one through the open
    /// folder when the path is too long.
    fn address(&self, name: &str) -> PathBuf {
        let path = self.path.join(name);
        if path.as_os_str().len() <= SUN_PATH_MAX {
            return path;
        }
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}/{name}", self.file.as_raw_fd()))
    }
}

/// A socket folder must belong to this user: a folder another user owns could hold their
/// socket, or let them swap ours.
pub(crate) fn check_private_dir(dir: &Path, meta: &fs::Metadata, uid: u32) -> Result<()> {
    if !meta.is_dir() || meta.uid() != uid {
        return Err(Failure::new(
            exit::ERROR,
            format!("{} is not a folder of this user (uid {uid})", dir.display()),
        )
        .hint(format!(
            "remove it (`rm -r {}`); cca makes it again",
            crate::human::shell_word(&dir.to_string_lossy())
        ))
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_folder_must_be_this_users() {
        let dir = tempfile::tempdir().unwrap();
        let meta = std::fs::metadata(dir.path()).unwrap();
        let me = rustix::process::geteuid().as_raw();
        assert!(check_private_dir(dir.path(), &meta, me).is_ok());
        let err = check_private_dir(dir.path(), &meta, me.wrapping_add(1));
        assert!(format!("{:#}", err.unwrap_err()).contains("not a folder of this user"));
    }
}
