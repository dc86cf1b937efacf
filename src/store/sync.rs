//! What `cca sync` keeps on this machine, and how it changes the sessions: `$CCA_HOME/sync/`
//! holds the key (0600), the state (where each session stands against the remote) and `repo/`,
//! git's clone of the remote, whose logs are written here too.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::files::{
    make_private_dir, open_regular_with, read_optional, read_regular, read_users_file, replace_file,
};
use super::ids::file_name;
use super::{Appender, FILE_MODE, Store};
use rustix::fs::OFlags;

impl Store {
    /// `$CCA_HOME/sync/`.
    pub(crate) fn sync_dir(&self) -> PathBuf {
        self.home.join("sync")
    }

    /// The clone of the remote: a git work tree of this machine's and the others' logs.
    pub(crate) fn sync_repo(&self) -> PathBuf {
        self.sync_dir().join("repo")
    }

    fn sync_key_path(&self) -> PathBuf {
        self.sync_dir().join("key")
    }

    fn sync_state_path(&self) -> PathBuf {
        self.sync_dir().join("state.json")
    }

    /// Where a sync started after a turn writes what it says, opened to append.
    pub(crate) fn sync_log(&self) -> Result<std::fs::File> {
        super::files::open_log(&self.sync_dir().join("sync.log"))
    }

    /// Makes `$CCA_HOME/sync/` (0700).
    pub(crate) fn make_sync_dir(&self) -> Result<()> {
        self.ensure()?;
        make_private_dir(&self.sync_dir())
    }

    fn sync_writing_path(&self) -> PathBuf {
        self.sync_dir().join("writing")
    }

    /// Marks that records are being written to this machine's logs, until they are committed:
    /// a sync that finds the mark knows one before it was killed in between.
    pub(crate) fn mark_sync_writing(&self) -> Result<()> {
        replace_file(&self.sync_writing_path(), b"")
    }

    pub(crate) fn sync_writing(&self) -> bool {
        self.sync_writing_path().exists()
    }

    pub(crate) fn clear_sync_writing(&self) -> Result<()> {
        match fs::remove_file(self.sync_writing_path()) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e)
                .with_context(|| format!("cannot remove {}", self.sync_writing_path().display())),
            _ => Ok(()),
        }
    }

    pub(crate) fn read_sync_key(&self) -> Result<Option<String>> {
        read_users_file(&self.sync_key_path())
    }

    pub(crate) fn write_sync_key(&self, key: &str) -> Result<()> {
        replace_file(&self.sync_key_path(), format!("{key}\n").as_bytes())
    }

    pub(crate) fn read_sync_state(&self) -> Result<Option<String>> {
        read_optional(&self.sync_state_path())
    }

    pub(crate) fn write_sync_state(&self, text: &str) -> Result<()> {
        replace_file(&self.sync_state_path(), text.as_bytes())
    }

    /// A session's text, in the sessions folder or (`trashed`) the trash; `None` when it is
    /// not there, an error when it is not UTF-8 (which no sync can carry as a transcript).
    pub(crate) fn read_session_text(&self, id: &str, trashed: bool) -> Result<Option<String>> {
        let path = if trashed { self.trashed_path(id) } else { self.session_path(id) };
        // A session file that is a link stays one: the file it points at is replaced.
        let path = super::files::through_links(&path);
        match read_regular(&path) {
            Ok(bytes) => {
                let text = String::from_utf8(bytes)
                    .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text", path.display()))?;
                // A file emptied, or its header cut off (an editor's crash, a full disk while
                // saving), is never sent: it would replace the session on every machine.
                crate::transcript::parse(&text).map_err(|e| super::not_transcript(&path, id, e))?;
                Ok(Some(text))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    /// Replaces a session's whole text (a change another machine made), in the sessions folder
    /// or the trash. Call it holding the session's lock.
    pub(crate) fn replace_session(&self, id: &str, text: &str, trashed: bool) -> Result<()> {
        let path = if trashed { self.trashed_path(id) } else { self.session_path(id) };
        // A session file that is a link stays one: the file it points at is replaced.
        let path = super::files::through_links(&path);
        if trashed {
            make_private_dir(&self.trash_dir())?;
        }
        replace_file(&path, text.as_bytes())?;
        let _ = fs::remove_file(self.live_index_path(id));
        Ok(())
    }

    /// Appends text another machine added to a session. Call it holding the session's lock.
    pub(crate) fn append_to_session(&self, id: &str, text: &str) -> Result<()> {
        Appender::open(self, id)?.append(text.as_bytes())
    }

    /// Whether a session id is taken here, live or in the trash.
    pub(crate) fn id_taken(&self, id: &str) -> bool {
        self.session_path(id).exists() || self.trash_dir().join(file_name(id)).exists()
    }
}

impl Store {
    /// The names of the images kept in `files/` (see [`Store::save_image`]).
    pub(crate) fn image_names(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.image_dir()) else { return Vec::new() };
        entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|name| crate::media::is_copy_name(name))
            .collect()
    }

    pub(crate) fn read_image(&self, name: &str) -> Result<Vec<u8>> {
        let path = self.image_dir().join(name);
        read_regular(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// Keeps an image another machine's session links to, under the name it has there (a
    /// copy's name is its content's hash, so one already here is the same image).
    pub(crate) fn keep_image_copy(&self, name: &str, bytes: &[u8]) -> Result<()> {
        anyhow::ensure!(crate::media::is_copy_name(name), "not an image copy's name: {name}");
        let path = self.image_dir().join(name);
        if path.exists() {
            return Ok(());
        }
        make_private_dir(&self.image_dir())?;
        replace_file(&path, bytes)
    }
}

/// A log of the sync repository, whole (empty when it is not there yet).
pub(crate) fn read_log(path: &Path) -> Result<Vec<u8>> {
    // Never through a link (git checks none out: a clone an older cca made may hold one).
    let read = open_regular_with(path, OpenOptions::new().read(true), OFlags::NOFOLLOW)
        .and_then(|mut file| {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes).map(|_| bytes)
        })
        .map_err(not_a_link);
    match read {
        Ok(bytes) => Ok(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The error of an open that met a link where `O_NOFOLLOW` forbids one, said as such.
fn not_a_link(e: std::io::Error) -> std::io::Error {
    match e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
        true => std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "it is a link, which cca does not follow there",
        ),
        false => e,
    }
}

/// Appends lines to this machine's log in the sync repository, making its folders; the log's
/// last line, if a crash cut it, is cut off first.
pub(crate) fn append_log(path: &Path, lines: &str) -> Result<()> {
    let dir = path.parent().context("a log has a folder")?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    options.read(true).append(true).create(true).mode(FILE_MODE);
    let file = open_regular_with(path, &mut options, OFlags::NOFOLLOW)
        .map_err(not_a_link)
        .with_context(|| format!("cannot open {}", path.display()))?;
    let bytes = read_log(path)?;
    let whole = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if whole < bytes.len() {
        file.set_len(whole as u64).with_context(|| format!("cannot repair {}", path.display()))?;
    }
    (&file)
        .write_all(lines.as_bytes())
        .and_then(|()| file.sync_data())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes a file of the sync repository whole (its description of itself, an image),
/// making its folders.
pub(crate) fn write_repo_file(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().context("a file has a folder")?;
    fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    replace_file(path, text.as_bytes())
}
