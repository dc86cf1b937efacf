//! Writing to a session: appends under its lock (the [`Appender`], one write and an fsync
//! each, keeping the live index current), and the whole-file rewrites that change its header.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::transcript::{self, Header, Summary};

use super::files::{open_regular, read_text, replace_file, set_mode, sync_dir};
use super::live_index::{LiveIndex, Stamp};
use super::{FILE_MODE, Store};

/// Appends records to a session. Use only while holding its
/// [`SessionLock`](super::lock::SessionLock).
///
/// Each append keeps the session's live index current: cca's own appends leave everything
/// before them as it was, so a checkpoint the index proved before the append still holds after.
pub(crate) struct Appender {
    file: File,
    path: PathBuf,
    store: Store,
    id: String,
    /// The open file's device and inode, to notice when another file takes its name.
    identity: (u64, u64),
}

impl Appender {
    pub(crate) fn open(store: &Store, id: &str) -> Result<Appender> {
        let path = store.session_path(id);
        let (file, identity) = Self::open_path(&path)?;
        Ok(Appender { file, path, store: store.clone(), id: id.to_string(), identity })
    }

    fn open_path(path: &Path) -> Result<(File, (u64, u64))> {
        use std::os::unix::fs::MetadataExt;
        let file = open_regular(path, OpenOptions::new().read(true).append(true))
            .with_context(|| format!("cannot open {} to append", path.display()))?;
        let meta = file.metadata().with_context(|| format!("cannot read {}", path.display()))?;
        Ok((file, (meta.dev(), meta.ino())))
    }

    /// An editor that saves by writing a new file and renaming it over the transcript (vim,
    /// `sed -i`) leaves the open file unlinked: appending to it would lose the words. When
    /// another file now has the path, it is opened instead (the editor's version is the
    /// transcript now) and this returns true.
    pub(crate) fn follow_replacement(&mut self) -> Result<bool> {
        use std::os::unix::fs::MetadataExt;
        let at_path = match fs::metadata(&self.path) {
            Ok(meta) => (meta.dev(), meta.ino()),
            // Gone (moved to the trash, say): the open file is still the session's.
            Err(_) => return Ok(false),
        };
        if at_path == self.identity {
            return Ok(false);
        }
        (self.file, self.identity) = Self::open_path(&self.path)?;
        Ok(true)
    }

    /// The file's length now: where the next append starts.
    pub(crate) fn len(&self) -> Result<u64> {
        let meta = self.file.metadata();
        Ok(meta.with_context(|| format!("cannot read {}", self.path.display()))?.len())
    }

    /// Whether the file still holds `bytes` at `offset`, where they were appended: an editor
    /// that saves in place (nano, VS Code, vim through the `latest` link) rewrites the same
    /// file, and may have written a version loaded before they were.
    pub(crate) fn holds_at(&self, offset: u64, bytes: &[u8]) -> bool {
        use std::os::unix::fs::FileExt;
        let mut held = vec![0; bytes.len()];
        self.file.read_exact_at(&mut held, offset).is_ok() && held == bytes
    }

    /// Whether the file holds these bytes (a record appended before it was replaced). Read
    /// whole, which only a replaced transcript needs.
    pub(crate) fn contains(&self, bytes: &[u8]) -> bool {
        let mut text = Vec::new();
        (&self.file)
            .seek(SeekFrom::Start(0))
            .and_then(|_| (&self.file).read_to_end(&mut text))
            .is_ok()
            && memchr::memmem::find(&text, bytes).is_some()
    }

    /// Appends `bytes` with one write and an fsync. If the write fails (disk full), the file is
    /// cut back to where it was, so a failed append leaves nothing half-written.
    pub(crate) fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.append_with(|w| w.write_all(bytes))
    }

    /// Like [`Self::append`], for records appended just after `summary` was read (a clear, a
    /// compaction): when nothing came between, the live index then starts the live context at
    /// the last clear or compaction among them, without reading the file again.
    pub(crate) fn append_after(&mut self, summary: &Summary, bytes: &[u8]) -> Result<()> {
        self.append_inner(|w| w.write_all(bytes), Some((summary, bytes)))
    }

    /// Like [`Self::append`], for records written in pieces (a large answer streamed from disk).
    pub(crate) fn append_with(
        &mut self,
        write: impl FnOnce(&mut File) -> io::Result<()>,
    ) -> Result<()> {
        self.append_inner(write, None)
    }

    fn append_inner(
        &mut self,
        write: impl FnOnce(&mut File) -> io::Result<()>,
        after: Option<(&Summary, &[u8])>,
    ) -> Result<()> {
        let stamp = Stamp::of(&self.file).ok();
        let before = self
            .file
            .seek(SeekFrom::End(0))
            .with_context(|| format!("cannot append to {}", self.path.display()))?;
        let result = write(&mut self.file).and_then(|()| self.file.sync_data());
        if let Err(e) = result {
            let _ = self.file.set_len(before);
            let _ = self.file.sync_data();
            return Err(e).with_context(|| {
                format!("cannot append to {} (nothing was changed)", self.path.display())
            });
        }
        if let Some(stamp) = stamp.filter(|s| s.size == before) {
            self.keep_index_current(stamp, after);
        }
        self.store.hint_changed(&self.id);
        Ok(())
    }

    /// After an append to a file stamped `before`: if the live index vouched for the file as it
    /// was, it now vouches for it as it is (with a later checkpoint, when the records appended
    /// are known and hold one).
    fn keep_index_current(&self, before: Stamp, after: Option<(&Summary, &[u8])>) {
        let Some(index) = self.store.read_live_index(&self.id) else { return };
        let Ok(now) = Stamp::of(&self.file) else { return };
        if index.stamp != before || !now.same_file(&before) || now.size < before.size {
            return;
        }
        let appended = now.size - before.size;
        let later = after
            .filter(|(_, bytes)| bytes.len() as u64 == appended)
            .and_then(|(summary, bytes)| transcript::read_on(summary, before.size, bytes))
            .and_then(|scan| scan.checkpoint);
        // The checkpoint proved, its seal with it; or a later one, sealed afresh. An index
        // without a checkpoint served its one purpose (this append) and is left to go stale.
        match later {
            Some(checkpoint) => {
                self.store.write_live_index(&self.id, &self.file, now, Some(checkpoint));
            }
            None if index.checkpoint.is_none() => {}
            None => self.store.keep_live_index(&LiveIndex { stamp: now, ..index }),
        }
    }
}

impl Store {
    /// Replaces a session's header (to name it) and keeps the rest of the file byte for byte.
    /// `header_end` is where the old header ends. Call under the session's lock; the file is
    /// replaced whole, through a temp file and a rename.
    pub(crate) fn rewrite_header(
        &self,
        id: &str,
        header: &transcript::Header,
        header_end: u64,
    ) -> Result<()> {
        self.rewrite_with(id, header, header_end, u64::MAX, b"")
    }

    /// As [`Store::rewrite_header`], keeping `body` bytes of the old body (all of it, or up to
    /// the records an import reads again), then `tail` (whole records): a new header and new
    /// records appear together or not at all (`cca import` going on).
    pub(crate) fn rewrite_with(
        &self,
        id: &str,
        header: &transcript::Header,
        header_end: u64,
        body: u64,
        tail: &[u8],
    ) -> Result<()> {
        // A session file that is a link stays one: the file it points at is replaced.
        let path = super::files::through_links(&self.session_path(id));
        let dir = path.parent().map_or_else(|| self.sessions_dir(), Path::to_path_buf);
        let mut temp = super::files::temp_file(&dir, ".replace-")?;
        let mut old = self.open_session(id)?;
        temp.write_all(transcript::render_header(header).as_bytes())
            .and_then(|()| old.seek(SeekFrom::Start(header_end)).map(drop))
            .and_then(|()| io::copy(&mut (&mut old).take(body), temp.as_file_mut()).map(drop))
            .and_then(|()| temp.write_all(tail))
            .and_then(|()| temp.as_file().sync_data())
            .with_context(|| format!("cannot rewrite {}", path.display()))?;
        set_mode(temp.path(), FILE_MODE)?;
        temp.persist(&path).with_context(|| format!("cannot replace {}", path.display()))?;
        sync_dir(&dir);
        Ok(())
    }

    /// Gives a session that has none a title (a session an editor opened before its first
    /// question). The caller holds the session's lock; the file is replaced atomically.
    pub(crate) fn set_title(&self, id: &str, title: &str) -> Result<()> {
        let path = super::files::through_links(&self.session_path(id));
        let text = read_text(&path)?;
        let summary = self.summarize(id)?;
        let header = Header { title: transcript::one_line(title, 80), ..summary.header };
        let rest = text.get(summary.header_end as usize..).unwrap_or("");
        replace_file(&path, (transcript::render_header(&header) + rest).as_bytes())
    }
}
