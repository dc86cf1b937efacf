//! Where the index's files are written: tantivy's own directory (files mapped into memory),
//! but without flushing each file to the disk as it is written.
//!
//! tantivy's directory calls `fsync` sixteen times an update (each new file, the folder, the
//! commit's `meta.json`), which was most of what a new exchange cost the next search. The index
//! is a cache of the transcripts, and what it has to survive is a kill (kill -9, Ctrl-C): the
//! system keeps what a killed process wrote, so a commit is there whole or not at all, flushed
//! or not. Only a system crash or a power loss can lose writes not yet on the disk; then a file
//! comes back short or empty (ext4's default ordering writes a file's data before its size), a
//! `meta.json` named over the old one is the old or the new, and an index that does not open,
//! or fails a search, is rebuilt.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tantivy::directory::error::{
    DeleteError, LockError, OpenDirectoryError, OpenReadError, OpenWriteError,
};
use tantivy::directory::{
    AntiCallToken, Directory, DirectoryLock, FileHandle, Lock, META_LOCK, MmapDirectory,
    TerminatingWrite, WatchCallback, WatchHandle, WritePtr,
};

/// The index's folder, read as tantivy reads it and written without flushing.
#[derive(Clone, Debug)]
pub(crate) struct Unflushed {
    root: PathBuf,
    mapped: MmapDirectory,
}

impl Unflushed {
    pub(crate) fn open(root: &Path) -> Result<Unflushed, OpenDirectoryError> {
        let mapped = MmapDirectory::open(root)?;
        Ok(Unflushed { root: root.to_path_buf(), mapped })
    }
}

/// tantivy makes its lock files with the umask's mode: they are made first, private, as every
/// other file of the index is, and one an older cca let tantivy make is made private. Done
/// before an update (under the update lock), not at every search.
pub(crate) fn private_locks(root: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::fs::PermissionsExt;
    for lock in [".tantivy-meta.lock", ".tantivy-writer.lock"] {
        // Not waiting on a FIFO put there, nor writing through a link.
        let flags = rustix::fs::OFlags::NONBLOCK | rustix::fs::OFlags::NOFOLLOW;
        let mut options = private_file();
        options.write(true).custom_flags(flags.bits() as i32);
        if let Ok(file) =
            options.open(root.join(lock)).and_then(|f| match f.metadata()?.is_file() {
                true => Ok(f),
                false => Err(io::Error::from(io::ErrorKind::InvalidData)),
            })
        {
            let _ = file.set_permissions(std::fs::Permissions::from_mode(0o600));
        }
    }
}

/// Options that make a file readable by its owner alone (0600), whatever the umask.
fn private_file() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.create(true).mode(0o600);
    options
}

/// A new file of the index: written straight to the file (a `BufWriter` is around it), and
/// finished without `fsync`.
struct NewFile(File);

impl Write for NewFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TerminatingWrite for NewFile {
    fn terminate_ref(&mut self, _: AntiCallToken) -> io::Result<()> {
        Ok(())
    }
}

impl Unflushed {
    /// tantivy opens its files by name, following links and waiting on a FIFO: anything but a
    /// regular file there (a FIFO would hang the search, a link to /dev/zero read without end)
    /// is an error, and the index is rebuilt.
    fn regular(&self, path: &Path) -> Result<(), OpenReadError> {
        match std::fs::symlink_metadata(self.root.join(path)) {
            Ok(meta) if !meta.is_file() => Err(OpenReadError::wrap_io_error(
                io::Error::new(io::ErrorKind::InvalidData, "it is not a regular file"),
                path.to_path_buf(),
            )),
            _ => Ok(()),
        }
    }
}

impl Directory for Unflushed {
    fn get_file_handle(&self, path: &Path) -> Result<Arc<dyn FileHandle>, OpenReadError> {
        self.regular(path)?;
        self.mapped.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        self.mapped.delete(path)
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.mapped.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        let file = private_file().write(true).create_new(true).open(self.root.join(path));
        let file = file.map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => OpenWriteError::FileAlreadyExists(path.to_path_buf()),
            _ => OpenWriteError::wrap_io_error(e, path.to_path_buf()),
        })?;
        Ok(BufWriter::new(Box::new(NewFile(file))))
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.regular(path)?;
        self.mapped.atomic_read(path)
    }

    /// Written beside, then named over the old: a reader sees the old or the new, whole.
    fn atomic_write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut file = tempfile::NamedTempFile::new_in(&self.root)?;
        file.write_all(data)?;
        file.persist(self.root.join(path)).map_err(|e| e.error)?;
        Ok(())
    }

    fn sync_directory(&self) -> io::Result<()> {
        Ok(())
    }

    /// A folder this user may not write (made read-only, or another user's) is searched all
    /// the same: the meta lock only keeps a writer's clean-up from deleting files while they
    /// are opened, and no writer of this user's can work there.
    fn acquire_lock(&self, lock: &Lock) -> Result<DirectoryLock, LockError> {
        // A lock file is empty and anyone's to make: anything else in its place goes.
        if self.regular(&lock.filepath).is_err() {
            let path = self.root.join(&lock.filepath);
            let _ = std::fs::remove_file(&path).or_else(|_| std::fs::remove_dir_all(&path));
        }
        match self.mapped.acquire_lock(lock) {
            Err(LockError::IoError(e))
                if lock.filepath == META_LOCK.filepath && super::index::is_forbidden(&e) =>
            {
                Ok(DirectoryLock::from(Box::new(())))
            }
            locked => locked,
        }
    }

    fn watch(&self, callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        self.mapped.watch(callback)
    }
}
