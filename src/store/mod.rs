//! Every file-system effect cca has: the `CCA_HOME` layout, session files, the `latest` link,
//! locks, appends, atomic replacement, and permissions.
//!
//! Rules kept here so no other module has to know them: directories are 0700 and files 0600
//! whatever the umask; appends are one write plus fsync under the session lock; anything
//! rewritten goes through a temp file in the same directory and a rename; reading never creates.
//!
//! Two caches live beside the transcripts, and neither is ever trusted without proof:
//! `index.json` (what `cca sessions` lists) and `live/ID.json` (where each session's live context
//! starts, so that a turn reads only that; see `live_index`). The second is the one file
//! rewritten in place rather than renamed: it changes at every append, and carries a checksum.
//! An append also leaves, where recall keeps an index, a hint of the session it changed
//! (`recall/changed`), rewritten in place too: the next search takes that session in first.
//!
//! This file holds the layout of `CCA_HOME` and the small files in it; the rest is in rooms by
//! idea: `files` (how one file is read, written and replaced), `ids` (session ids and names),
//! `latest`, `lock`, `write` (appends and rewrites), `read` (summaries), `live_index`,
//! `listing` (`index.json`), `trash` and `sync` (what `cca sync` keeps).

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::error::Failure;

mod auto;
mod engine_home;
mod files;
mod ids;
mod latest;
mod listing;
mod live_index;
mod lock;
mod names;
mod read;
pub(crate) mod socket;
mod stamping;
mod sync;
mod trash;
mod watch;
mod write;

pub(crate) use auto::{read_settings, remove_settings, settings_writable, write_settings};
pub(crate) use engine_home::{EngineHome, remove_engine_session_files};
pub(crate) use files::make_private_dir;
pub(crate) use files::set_mode;
pub(crate) use files::{
    read_at_most, read_text, read_text_at_most, replace_cache_file, replace_file,
};
use files::{read_optional, read_users_file, sync_dir};
pub(crate) use ids::{sort_key, sort_key_of, validate_id, validate_name};
pub(crate) use latest::Repointed;
pub(crate) use listing::{Listed, newest_first};
pub(crate) use live_index::fnv1a;
pub(crate) use read::not_transcript;
pub(crate) use stamping::{Stamp, Stamped, digest, on_any_core};
pub(crate) use sync::{append_log, read_log, write_repo_file};
pub(crate) use trash::{remove_files_in, take_engine_session_file, take_file_below};
pub(crate) use watch::SessionsWatch;
pub(crate) use write::Appender;

pub(crate) const DIR_MODE: u32 = 0o700;
pub(crate) const FILE_MODE: u32 = 0o600;
/// How much of a transcript's start is read for its header alone.
const HEAD_BYTES: u64 = 128 * 1024;
const LATEST: &str = "latest";
const PREFIX: &str = "session_";
const SUFFIX: &str = ".md";

/// The `CCA_HOME` folder and what lives in it.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub home: PathBuf,
}

/// The most sessions the hint names: more than a search reads beside the index.
const HINTED_MOST: usize = 32;

/// The sessions a hint file names, a line each; `None` for a file that is not one.
fn read_hint(file: &fs::File) -> Option<Vec<String>> {
    use std::io::Read;
    let mut text = String::new();
    file.take(HINTED_MOST as u64 * 130).read_to_string(&mut text).ok()?;
    let ids: Vec<String> = text.strip_suffix('\n')?.split('\n').map(str::to_string).collect();
    ids.iter().all(|id| validate_id(id).is_ok()).then_some(ids)
}

impl Store {
    pub(crate) fn new(home: PathBuf) -> Store {
        Store { home }
    }

    pub(crate) fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    fn locks_dir(&self) -> PathBuf {
        self.home.join("locks")
    }

    pub(crate) fn trash_dir(&self) -> PathBuf {
        self.home.join("trash")
    }

    /// Where records cut off by a crash are kept once taken out of their transcripts.
    pub(crate) fn damaged_dir(&self) -> PathBuf {
        self.home.join("damaged")
    }

    fn index_path(&self) -> PathBuf {
        self.home.join("index.json")
    }

    fn live_dir(&self) -> PathBuf {
        self.home.join("live")
    }

    fn live_index_path(&self, id: &str) -> PathBuf {
        self.live_dir().join(format!("{id}.json"))
    }

    /// Where an engine's notes for a session are kept (`engine::Request::notes`). Ids hold no
    /// dot, so `ID.` starts only that session's files.
    fn engine_notes_path(&self, id: &str, engine: &str) -> PathBuf {
        self.live_dir().join(format!("{id}.{engine}-notes.json"))
    }

    /// The notes an engine left for a session, if any: a cache, whose loss costs one turn of
    /// the provider's prompt cache, nothing more.
    pub(crate) fn engine_notes(&self, id: &str, engine: &str) -> Option<String> {
        fs::read_to_string(self.engine_notes_path(id, engine)).ok()
    }

    pub(crate) fn keep_engine_notes(&self, id: &str, engine: &str, notes: &str) -> Result<()> {
        make_private_dir(&self.live_dir())?;
        replace_file(&self.engine_notes_path(id, engine), notes.as_bytes())
    }

    pub(crate) fn config_path(&self) -> PathBuf {
        self.home.join("config.toml")
    }

    pub(crate) fn latest_path(&self) -> PathBuf {
        self.sessions_dir().join(LATEST)
    }

    /// Fails early, and clearly, when `CCA_HOME` cannot be a folder (a file is in its way).
    pub(crate) fn check_home(&self) -> Result<()> {
        let blocker = self.home.ancestors().find(|p| p.exists()).filter(|p| !p.is_dir());
        if let Some(blocker) = blocker {
            return Err(Failure::usage(format!(
                "CCA_HOME ({}) cannot be used: {} is not a folder",
                self.home.display(),
                blocker.display()
            ))
            .hint("set CCA_HOME to a folder you can write to, or move that file away")
            .into());
        }
        Ok(())
    }

    /// Creates `CCA_HOME` and its folders (0700) if missing.
    pub(crate) fn ensure(&self) -> Result<()> {
        for dir in [&self.home, &self.sessions_dir(), &self.locks_dir()] {
            make_private_dir(dir)?;
        }
        Ok(())
    }

    /// `$CCA_HOME/recall/`: the index `cca recall` ranks from, a cache of the transcripts.
    pub(crate) fn recall_dir(&self) -> PathBuf {
        self.home.join("recall")
    }

    /// `recall/changed`: the id of the session cca last appended to, left for the next search
    /// to bring into the recall index while it stats the rest (a hint, never trusted: the search
    /// still looks at every session).
    fn changed_hint_path(&self) -> PathBuf {
        self.recall_dir().join("changed")
    }

    /// The sessions the hint names, and when it was last left; `None` when there is none, or
    /// it names no session (half-written, or written by hand).
    pub(crate) fn changed_hint(&self) -> Option<(Vec<String>, std::time::SystemTime)> {
        let file = files::open_regular_with(
            &self.changed_hint_path(),
            OpenOptions::new().read(true),
            rustix::fs::OFlags::NOFOLLOW,
        )
        .ok()?;
        let at = file.metadata().and_then(|m| m.modified()).ok()?;
        let ids = read_hint(&file)?;
        (!ids.is_empty()).then_some((ids, at))
    }

    /// Removes the hint, once the index holds what it names.
    pub(crate) fn remove_changed_hint(&self) {
        let _ = fs::remove_file(self.changed_hint_path());
    }

    /// Leaves the hint that session `id` changed, where recall keeps an index (none is made
    /// for it): a line added to those of the sessions changed since the hint was last taken
    /// in, the oldest dropped past [`HINTED_MOST`]. Rewritten in place, as the live index is:
    /// a hint read half-written names no session, and the search then does without it; one
    /// that misses a session only makes the search that reads it go the longer way.
    pub(crate) fn hint_changed(&self, id: &str) {
        use std::os::unix::fs::FileExt;
        let Ok(file) = files::open_cache_in_place(&self.changed_hint_path()) else { return };
        let mut ids = read_hint(&file).unwrap_or_default();
        ids.retain(|held| held != id);
        let drop = (ids.len() + 1).saturating_sub(HINTED_MOST);
        let mut text: String = ids[drop..].iter().map(|id| format!("{id}\n")).collect();
        text.push_str(id);
        text.push('\n');
        let _ =
            file.write_all_at(text.as_bytes(), 0).and_then(|()| file.set_len(text.len() as u64));
    }

    /// Makes [`Self::recall_dir`] (0700, with `CCA_HOME`) if it is not there.
    pub(crate) fn make_recall_dir(&self) -> Result<PathBuf> {
        self.ensure()?;
        let dir = self.recall_dir();
        // What recall keeps is a cache of the transcripts: a file where its folder should be
        // (or a link to none) is not the user's to keep; a link to a folder is.
        let a_folder = fs::metadata(&dir).is_ok_and(|m| m.is_dir());
        if !a_folder && fs::symlink_metadata(&dir).is_ok() {
            fs::remove_file(&dir).with_context(|| format!("cannot remove {}", dir.display()))?;
        }
        make_private_dir(&dir)?;
        Ok(dir)
    }

    /// Where `cca chat` keeps the lines typed, for its line editor's history.
    pub(crate) fn chat_history_path(&self) -> PathBuf {
        self.home.join("chat_history")
    }

    /// Makes a file another library wrote for cca private (0600), as cca's own files are.
    pub(crate) fn make_private(&self, path: &Path) {
        let _ = set_mode(path, FILE_MODE);
    }

    /// The config file's text, if there is one.
    pub(crate) fn read_config(&self) -> Result<Option<String>> {
        read_users_file(&self.config_path())
    }

    /// `$CCA_HOME/prompts/NAME.md`, if the user has one (it overrides a built-in).
    pub(crate) fn read_prompt_override(&self, name: &str) -> Result<Option<String>> {
        read_users_file(&self.home.join("prompts").join(format!("{name}.md")))
    }

    /// Temporary files an interrupted cca may have left behind (a crash before its cleanup):
    /// none that a running cca holds (locked: a turn's engine files, a file being written; a
    /// `latest` link being made by a process still running).
    pub(crate) fn leftovers(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for dir in [self.home.clone(), self.sessions_dir(), self.image_dir()] {
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if [".new-session-", ".latest-", ".engine-", ".replace-", ".image-"]
                    .iter()
                    .any(|p| name.starts_with(p))
                {
                    let maker = name.strip_prefix(".latest-").and_then(|n| n.split('-').next());
                    let running = maker.is_some_and(|pid| Path::new("/proc").join(pid).exists());
                    if !running && !files::in_use(&entry.path()) {
                        found.push(entry.path());
                    }
                }
            }
        }
        found
    }

    /// Names of the user's own prompts: `$CCA_HOME/prompts/**/NAME.md`.
    pub(crate) fn prompt_names(&self) -> Result<Vec<String>> {
        fn walk(dir: &Path, prefix: &str, names: &mut Vec<String>) {
            let Ok(entries) = fs::read_dir(dir) else { return };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let path = entry.path();
                if path.is_dir() && !name.starts_with('.') {
                    walk(&path, &format!("{prefix}{name}/"), names);
                } else if let Some(stem) = name.strip_suffix(".md") {
                    let full = format!("{prefix}{stem}");
                    if crate::prompt::validate_name(&full).is_ok() {
                        names.push(full);
                    }
                }
            }
        }
        let mut names = Vec::new();
        walk(&self.home.join("prompts"), "", &mut names);
        Ok(names)
    }

    /// Where `cca import` keeps what it read: each source file's size and modification time,
    /// and the session each conversation became.
    pub(crate) fn imports_path(&self) -> PathBuf {
        self.home.join("imports.json")
    }

    pub(crate) fn read_imports(&self) -> Result<Option<String>> {
        read_optional(&self.imports_path())
    }

    pub(crate) fn write_imports(&self, text: &str) -> Result<()> {
        self.ensure()?;
        replace_file(&self.imports_path(), text.as_bytes())
    }

    /// Writes a file where another tool keeps its own (`cca export`): folders made as needed,
    /// the file replaced whole (temp file, fsync, rename) and private; a link is followed, and
    /// stays a link ([`files::through_links`]).
    pub(crate) fn write_beside(&self, path: &Path, contents: &[u8]) -> Result<()> {
        let path = &files::through_links(path);
        let dir = path.parent().context("a file to write has a folder")?;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        replace_file(path, contents)
    }

    /// Removes a file [`Store::write_beside`] wrote (the file a link points at), when what
    /// went with it failed. Best effort: a file left is the tool's to list, never cca's to
    /// read again.
    pub(crate) fn remove_beside(&self, path: &Path) {
        let _ = fs::remove_file(files::through_links(path));
    }

    /// A file to tee an answer into as it streams: unnamed, private, gone when dropped.
    /// Called under a session lock, so the folders exist.
    pub(crate) fn scratch_file(&self) -> Result<File> {
        tempfile::tempfile_in(self.sessions_dir()).with_context(|| {
            format!("cannot create a scratch file in {}", self.sessions_dir().display())
        })
    }

    /// A private folder for files handed to an engine (system prompt, history); removed on drop.
    /// Called under a session lock, so `CCA_HOME` exists.
    pub(crate) fn engine_scratch_dir(&self) -> Result<EngineFiles> {
        let dir = tempfile::Builder::new()
            .prefix(".engine-")
            .tempdir_in(&self.home)
            .with_context(|| format!("cannot create a folder in {}", self.home.display()))?;
        let lock = EngineFiles::lock(dir.path());
        Ok(EngineFiles { dir, _lock: lock })
    }

    /// `$CCA_HOME/standby/`: the sockets and locks of engines waiting for a one-shot turn.
    pub(crate) fn standby_dir(&self) -> PathBuf {
        self.home.join("standby")
    }

    /// `$CCA_HOME/run/`: the endpoints of running turns (steer sockets).
    pub(crate) fn run_dir(&self) -> PathBuf {
        self.home.join("run")
    }

    /// Where the turn running in a session listens for steers.
    pub(crate) fn steer_socket_path(&self, id: &str) -> PathBuf {
        self.run_dir().join(format!("{id}.sock"))
    }

    /// Makes [`Self::run_dir`] (0700) if it is not there; `steer` checks whose it is.
    pub(crate) fn make_run_dir(&self) -> Result<PathBuf> {
        let path = self.run_dir();
        make_private_dir(&path)?;
        Ok(path)
    }

    /// Where images attached to questions are kept.
    pub(crate) fn image_dir(&self) -> PathBuf {
        self.home.join(crate::media::FILES_DIR)
    }

    /// Keeps a copy of an image attached to a question, as `$CCA_HOME/files/NAME` (0600, the
    /// folder 0700), named by its content: a copy already there is the same image. Written to a
    /// temp file and renamed, so a reader never sees half an image.
    pub(crate) fn save_image(&self, image: &crate::media::Image) -> Result<PathBuf> {
        let dir = self.image_dir();
        make_private_dir(&dir)?;
        let path = dir.join(image.file_name());
        if fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == image.bytes.len() as u64) {
            return Ok(path);
        }
        let mut temp = files::temp_file(&dir, ".image-")?;
        temp.write_all(&image.bytes)
            .and_then(|()| temp.as_file().sync_data())
            .with_context(|| format!("cannot write {}", path.display()))?;
        set_mode(temp.path(), FILE_MODE)?;
        temp.persist(&path).with_context(|| format!("cannot write {}", path.display()))?;
        sync_dir(&dir);
        Ok(path)
    }

    /// Writes a file inside a folder from [`Self::engine_scratch_dir`].
    pub(crate) fn write_private(&self, path: &Path, contents: &[u8]) -> Result<()> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(FILE_MODE)
            .open(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        file.write_all(contents).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// A folder of files handed to an engine ([`Store::engine_scratch_dir`]), locked (shared) while
/// it is in use, and removed when dropped.
#[derive(Debug)]
pub(crate) struct EngineFiles {
    dir: tempfile::TempDir,
    _lock: Option<File>,
}

impl EngineFiles {
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps the folder for another process (a standby), which takes its own lock
    /// ([`EngineFiles::lock`]) and removes it.
    pub(crate) fn keep(self) -> PathBuf {
        self.dir.keep()
    }

    /// A shared lock on the folder `path`, held as long as the file is open.
    pub(crate) fn lock(path: &Path) -> Option<File> {
        let file = File::open(path).ok()?;
        file.lock_shared().ok()?;
        Some(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_each_session_changed_once_the_latest_last_and_no_more_than_its_most() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("home"));
        store.make_recall_dir().unwrap();
        let ids = || store.changed_hint().map(|(ids, _)| ids).unwrap_or_default();
        store.hint_changed("a");
        store.hint_changed("b");
        store.hint_changed("a");
        assert_eq!(ids(), ["b", "a"]);
        for n in 0..40 {
            store.hint_changed(&format!("s{n}"));
        }
        let held = ids();
        assert_eq!(held.len(), HINTED_MOST);
        assert_eq!(held.last().unwrap(), "s39");
        assert_eq!(held[0], format!("s{}", 40 - HINTED_MOST));
        // A hint that is not one (written by hand, cut short) names only what comes next.
        fs::write(store.changed_hint_path(), "a\n../etc\n").unwrap();
        assert!(store.changed_hint().is_none());
        store.hint_changed("c");
        assert_eq!(ids(), ["c"]);
        fs::write(store.changed_hint_path(), "a\nb").unwrap();
        assert!(store.changed_hint().is_none(), "cut short");
        store.remove_changed_hint();
        assert!(store.changed_hint().is_none());
    }

    #[test]
    fn an_image_is_kept_once_by_its_content_and_a_cut_copy_is_a_leftover() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("home"));
        store.ensure().unwrap();
        let image = crate::media::Image::new(b"GIF89a\x01\x00".to_vec()).unwrap();
        let path = store.save_image(&image).unwrap();
        assert_eq!(path, store.image_dir().join(image.file_name()));
        assert_eq!(fs::read(&path).unwrap(), &image.bytes[..]);
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(store.save_image(&image).unwrap(), path);
        assert_eq!(fs::read_dir(store.image_dir()).unwrap().count(), 1);
        fs::write(store.image_dir().join(".image-x1"), "cut").unwrap();
        assert_eq!(store.leftovers(), [store.image_dir().join(".image-x1")]);
    }
}
