//! One file at a time, as cca keeps them: only regular files are read (never a FIFO or a
//! device), folders are 0700 and files 0600 whatever the umask, and a file replaced whole goes
//! through a temp file in the same folder, fsync and a rename.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::error::Failure;

use super::{DIR_MODE, FILE_MODE};

pub(super) fn read_optional(path: &Path) -> Result<Option<String>> {
    match read_regular(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Failure::usage(format!("{} is not UTF-8 text", path.display())).into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// [`read_optional`] for a file the user writes (the config, a prompt, the sync key): a link to
/// nothing there is a file they meant cca to read, not the absence of one.
pub(super) fn read_users_file(path: &Path) -> Result<Option<String>> {
    let read = read_optional(path)?;
    if read.is_none()
        && let Ok(target) = std::fs::read_link(path)
    {
        let what =
            format!("{} is a link to {}, which does not exist", path.display(), target.display());
        bail!(Failure::usage(what).hint("point the link at the file, or remove it"));
    }
    Ok(read)
}

/// Opens a file cca keeps (a transcript, `latest`, the config, the index) only if it is a
/// regular file: a FIFO would block the open or the read forever, and a device such as
/// /dev/zero would never end. O_NONBLOCK keeps the open itself from waiting; on a regular file
/// it changes nothing.
pub(super) fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    open_regular_with(path, options, rustix::fs::OFlags::empty())
}

/// [`open_regular`], with more flags for the open (`O_NOFOLLOW`, say).
pub(super) fn open_regular_with(
    path: &Path,
    options: &mut OpenOptions,
    flags: rustix::fs::OFlags,
) -> io::Result<File> {
    let flags = flags | rustix::fs::OFlags::NONBLOCK;
    let file = options.custom_flags(flags.bits() as i32).open(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    use std::os::unix::fs::FileTypeExt;
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_dir() {
        "a folder"
    } else {
        "something else"
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, format!("it is {what}, not a regular file")))
}

/// Opens a cache cca rewrites in place (the live index, recall's hint) to write it, made if
/// need be (0600): never through a link (a link there would have the write land on whatever it
/// names, a transcript included), never waiting on a FIFO, only ever a regular file. Anything
/// else found there is removed and the file made anew; what cannot be (a folder) leaves the
/// cache unwritten, which costs only what the cache saves.
pub(super) fn open_cache_in_place(path: &Path) -> io::Result<File> {
    let open = || {
        let mut options = OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false).mode(FILE_MODE);
        open_regular_with(path, &mut options, rustix::fs::OFlags::NOFOLLOW)
    };
    match open() {
        Err(e) if e.kind() != io::ErrorKind::NotFound && fs::remove_file(path).is_ok() => open(),
        opened => opened,
    }
}

/// Local file systems, whose every change the kernel sees and times to the nanosecond (by
/// `statfs`'s magic numbers): ext2 to 4, XFS, Btrfs, tmpfs, F2FS, ZFS, bcachefs and overlayfs.
/// Not NFS, SMB or FUSE (changes may come from another machine, and be timed to the second),
/// nor FAT (timed to two seconds).
const LOCAL: [u32; 8] = [
    0xEF53,
    0x5846_5342,
    0x9123_683E,
    0x0102_1994,
    0xF2F5_2010,
    0x2FC1_2FC1,
    0xCA45_1A4E,
    0x794C_7630,
];

/// Whether the open file or folder `fd` lies on a local file system ([`LOCAL`]).
pub(super) fn local_file_system(fd: &rustix::fd::OwnedFd) -> bool {
    // The low 32 bits: `f_type` is a signed long, and the magic numbers are 32-bit.
    rustix::fs::fstatfs(fd).is_ok_and(|s| LOCAL.contains(&(s.f_type as u32)))
}

/// Reads a whole file cca keeps; see [`open_regular`].
pub(super) fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path, OpenOptions::new().read(true))?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads a whole text file: a transcript, or a file the user named (a prompt file, a key).
pub(crate) fn read_text(path: &Path) -> Result<String> {
    read_text_at_most(path, u64::MAX)
}

/// [`read_text`], refusing a file of more than `cap` bytes before reading it.
pub(crate) fn read_text_at_most(path: &Path, cap: u64) -> Result<String> {
    let bytes =
        read_at_most(path, cap).with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes)
        .map_err(|_| Failure::usage(format!("{} is not UTF-8 text", path.display())).into())
}

/// A whole file the user named, refused when over `cap` bytes before it is read; only a
/// regular file, as [`open_regular`] says (a FIFO named by mistake would wait forever,
/// /dev/zero never end).
pub(crate) fn read_at_most(path: &Path, cap: u64) -> io::Result<Vec<u8>> {
    let file = open_regular(path, OpenOptions::new().read(true))?;
    let size = file.metadata()?.len();
    if size > cap {
        return Err(io::Error::other(format!(
            "it is {}, more than cca takes ({})",
            crate::human::human_bytes(size),
            crate::human::human_bytes(cap)
        )));
    }
    // Room for the whole file and the read that finds its end: one read, not a growing buffer.
    let mut bytes = Vec::new();
    bytes
        .try_reserve_exact(usize::try_from(size).map_or(0, |size| size + 1))
        .map_err(io::Error::other)?;
    file.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

pub(crate) fn make_private_dir(dir: &Path) -> Result<()> {
    match fs::DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => set_mode(dir, DIR_MODE),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot create the folder {}", dir.display())),
    }
}

pub(crate) fn set_mode(path: &Path, mode: u32) -> Result<()> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("cannot set permissions on {}", path.display()))
}

/// A temporary file in `dir` named `PREFIX...`, locked (shared) while this cca has it open, so
/// that `Store::leftovers` never calls it left over while it is being written.
pub(super) fn temp_file(dir: &Path, prefix: &str) -> Result<tempfile::NamedTempFile> {
    let temp = tempfile::Builder::new()
        .prefix(prefix)
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    let _ = temp.as_file().lock_shared();
    Ok(temp)
}

/// Whether a temporary file or folder is in use: someone holds a lock on it.
pub(super) fn in_use(path: &Path) -> bool {
    File::open(path).is_ok_and(|f| matches!(f.try_lock(), Err(fs::TryLockError::WouldBlock)))
}

/// Past this, a log starts again (the last one kept as `NAME.log.old`).
const LOG_LIMIT: u64 = 1024 * 1024;

/// A log of what cca did in the background, opened to append: private, and started again
/// past [`LOG_LIMIT`].
pub(super) fn open_log(path: &Path) -> Result<File> {
    if fs::metadata(path).is_ok_and(|m| m.len() > LOG_LIMIT) {
        let _ = fs::rename(path, path.with_extension("log.old"));
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(FILE_MODE)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))
}

/// Replaces a file's contents atomically: temp file in the same folder, fsync, rename.
pub(crate) fn replace_file(path: &Path, contents: &[u8]) -> Result<()> {
    replace(path, contents, true)
}

/// [`replace_file`] without waiting for the disk: for a cache that checks itself when read, so
/// that a file a system crash cut short is rebuilt rather than trusted.
pub(crate) fn replace_cache_file(path: &Path, contents: &[u8]) -> Result<()> {
    replace(path, contents, false)
}

/// The file a path names once every link on the way to it is followed, whether or not that
/// file exists yet: writing there keeps a link (a dotfiles repository's, even one whose file is
/// not made yet) a link. A chain of links longer than the kernel follows ends at its last link.
pub(super) fn through_links(path: &Path) -> PathBuf {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        let Ok(target) = fs::read_link(&at) else { break };
        at = match at.parent() {
            Some(dir) => dir.join(target),
            None => target,
        };
    }
    at
}

/// A temp file in the same folder, renamed over `path`; flushed to the disk, and the rename
/// with it, when `durable`.
fn replace(path: &Path, contents: &[u8], durable: bool) -> Result<()> {
    let dir = path.parent().context("a file to replace has a folder")?;
    let mut temp = temp_file(dir, ".replace-")?;
    temp.write_all(contents)
        .and_then(|()| if durable { temp.as_file().sync_data() } else { Ok(()) })
        .with_context(|| format!("cannot write {}", path.display()))?;
    set_mode(temp.path(), FILE_MODE)?;
    temp.persist(path).with_context(|| format!("cannot replace {}", path.display()))?;
    if durable {
        sync_dir(dir);
    }
    Ok(())
}

/// Makes a rename or creation in `dir` durable. Best effort: not every file system allows it.
pub(super) fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
