//! Every file-system effect cca has: the `CCA_HOME` layout, session files, the `latest` link,
//! locks, appends, atomic replacement, and permissions.
//!
//! Rules kept here so no other module has to know them: directories are 0700 and files 0600
//! whatever the umask; appends are one write plus fsync under the session lock; anything
//! rewritten goes through a temp file in the same directory and a rename; reading never creates.
//!
//! Two caches live beside the transcripts, and neither is ever trusted without proof:
//! `index.json` (what `cca sessions` lists) and `live/ID.json` (where each session's live context
//! starts, so that a turn reads only that; see [`LiveIndex`]). The second is the one file
//! rewritten in place rather than renamed: it changes at every append, and carries a checksum.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::error::{Failure, exit};
use crate::transcript::{self, Checkpoint, Header, NotTranscript, Summary, Totals};

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;
/// How much of a transcript's start is read for its header alone.
const HEAD_BYTES: u64 = 128 * 1024;
const LATEST: &str = "latest";
const PREFIX: &str = "session_";
const SUFFIX: &str = ".md";

/// The `CCA_HOME` folder and what lives in it.
#[derive(Debug, Clone)]
pub struct Store {
    pub home: PathBuf,
}

impl Store {
    pub fn new(home: PathBuf) -> Store {
        Store { home }
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.home.join("sessions")
    }

    fn locks_dir(&self) -> PathBuf {
        self.home.join("locks")
    }

    pub fn trash_dir(&self) -> PathBuf {
        self.home.join("trash")
    }

    /// Where records cut off by a crash are kept once taken out of their transcripts.
    pub fn damaged_dir(&self) -> PathBuf {
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

    pub fn config_path(&self) -> PathBuf {
        self.home.join("config.toml")
    }

    pub fn latest_path(&self) -> PathBuf {
        self.sessions_dir().join(LATEST)
    }

    /// Fails early, and clearly, when `CCA_HOME` cannot be a folder (a file is in its way).
    pub fn check_home(&self) -> Result<()> {
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
    pub fn ensure(&self) -> Result<()> {
        for dir in [&self.home, &self.sessions_dir(), &self.locks_dir()] {
            make_private_dir(dir)?;
        }
        Ok(())
    }

    /// Where `cca chat` keeps the lines typed, for its line editor's history.
    pub fn chat_history_path(&self) -> PathBuf {
        self.home.join("chat_history")
    }

    /// Makes a file another library wrote for cca private (0600), as cca's own files are.
    pub fn make_private(&self, path: &Path) {
        let _ = set_mode(path, FILE_MODE);
    }

    /// The config file's text, if there is one.
    pub fn read_config(&self) -> Result<Option<String>> {
        read_optional(&self.config_path())
    }

    /// `$CCA_HOME/prompts/NAME.md`, if the user has one (it overrides a built-in).
    pub fn read_prompt_override(&self, name: &str) -> Result<Option<String>> {
        read_optional(&self.home.join("prompts").join(format!("{name}.md")))
    }

    /// Temporary files an interrupted cca may have left behind (a crash before its cleanup).
    pub fn leftovers(&self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for dir in [self.home.clone(), self.sessions_dir(), self.image_dir()] {
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if [".new-session-", ".latest-", ".engine-", ".replace-", ".image-"]
                    .iter()
                    .any(|p| name.starts_with(p))
                {
                    found.push(entry.path());
                }
            }
        }
        found
    }

    /// Names of the user's own prompts: `$CCA_HOME/prompts/**/NAME.md`.
    pub fn prompt_names(&self) -> Result<Vec<String>> {
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

    pub fn session_path(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(file_name(id))
    }

    /// Creates a new session file holding `contents(id)`, named after `stamp`; a second session
    /// in the same second gets `-2`, `-3`, ... The file appears whole or not at all.
    pub fn create_session(&self, stamp: &str, contents: impl Fn(&str) -> String) -> Result<String> {
        self.create_session_with(stamp, contents, true)
    }

    /// As [`Store::create_session`], without waiting for the disk: for many sessions at once
    /// (`cca import`), each still appears whole (a temp file renamed into place), and
    /// [`Store::sync_sessions`] makes them all durable at the end, with one sync instead of two
    /// per session (10,000 sessions: 17 s of fsyncs on the benchmark's disk).
    pub fn create_session_unsynced(
        &self,
        stamp: &str,
        contents: impl Fn(&str) -> String,
    ) -> Result<String> {
        self.create_session_with(stamp, contents, false)
    }

    /// Makes everything written to the sessions' file system durable (`syncfs`).
    pub fn sync_sessions(&self) -> Result<()> {
        let dir = File::open(self.sessions_dir())
            .with_context(|| format!("cannot open {}", self.sessions_dir().display()))?;
        rustix::fs::syncfs(&dir)
            .with_context(|| format!("cannot sync {}", self.sessions_dir().display()))
    }

    fn create_session_with(
        &self,
        stamp: &str,
        contents: impl Fn(&str) -> String,
        sync: bool,
    ) -> Result<String> {
        for n in 1u32.. {
            let id = if n == 1 { stamp.to_string() } else { format!("{stamp}-{n}") };
            // Taken names are skipped cheaply; the no-clobber rename settles any race.
            if !self.session_path(&id).exists() && self.create_file_as(&id, &contents(&id), sync)? {
                return Ok(id);
            }
        }
        unreachable!("the loop returns")
    }

    /// The id [`Store::create_session`] would give now, skipping those `reserved` says are
    /// promised elsewhere; nothing is written.
    pub fn free_id(&self, stamp: &str, reserved: impl Fn(&str) -> bool) -> String {
        (1u32..)
            .map(|n| if n == 1 { stamp.to_string() } else { format!("{stamp}-{n}") })
            .find(|id| !reserved(id) && !self.session_path(id).exists())
            .expect("some name is free")
    }

    /// Creates the session file `id` holding `contents`, whole or not at all; `false` when a
    /// session of that id exists already (it is left as it is).
    pub fn create_session_as(&self, id: &str, contents: &str) -> Result<bool> {
        self.create_file_as(id, contents, true)
    }

    /// [`Store::create_session_as`], synced to the disk or not (`sync`).
    fn create_file_as(&self, id: &str, contents: &str, sync: bool) -> Result<bool> {
        self.ensure()?;
        let dir = self.sessions_dir();
        let mut temp = tempfile::Builder::new()
            .prefix(".new-session-")
            .tempfile_in(&dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        temp.write_all(contents.as_bytes())
            .and_then(|()| if sync { temp.as_file().sync_data() } else { Ok(()) })
            .with_context(|| format!("cannot write a new session in {}", dir.display()))?;
        set_mode(temp.path(), FILE_MODE)?;
        match temp.persist_noclobber(self.session_path(id)) {
            Ok(_) => {
                if sync {
                    sync_dir(&dir);
                }
                Ok(true)
            }
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e.error)
                .with_context(|| format!("cannot create {}", self.session_path(id).display())),
        }
    }

    /// Points `latest` at a session, atomically: readers see the old or the new link, never none.
    pub fn set_latest(&self, id: &str) -> Result<()> {
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
    pub fn latest(&self) -> Result<Option<String>> {
        let link = self.latest_path();
        let target = match fs::read_link(&link) {
            Ok(target) => target,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            // Not a symlink: the text-file form.
            Err(e) if e.kind() == io::ErrorKind::InvalidInput => PathBuf::from(
                String::from_utf8_lossy(
                    &read_regular(&link)
                        .with_context(|| format!("cannot read {}", link.display()))?,
                )
                .trim(),
            ),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", link.display())),
        };
        let bad = |why: &str| {
            Failure::new(
                exit::ERROR,
                format!("{} points to `{}`, {why}", link.display(), target.display()),
            )
            .hint("start a new session with `cca search QUESTION`, or pick one with --session ID")
        };
        // An absolute link (made by hand, or by another tool) is as good when it points into
        // this folder.
        let name = match (target.parent(), target.file_name()) {
            (Some(dir), Some(name)) if target.is_absolute() && self.is_sessions_dir(dir) => {
                Path::new(name)
            }
            _ => target.as_path(),
        };
        let Some(id) = name.to_str().and_then(id_from_file_name) else {
            return Err(bad("which is not a session file in this folder").into());
        };
        if !self.session_path(&id).is_file() {
            return Err(bad("which does not exist").into());
        }
        Ok(Some(id))
    }

    fn is_sessions_dir(&self, dir: &Path) -> bool {
        let sessions = self.sessions_dir();
        dir == sessions
            || matches!((dir.canonicalize(), sessions.canonicalize()), (Ok(a), Ok(b)) if a == b)
    }

    /// Every session id, in no particular order.
    pub fn session_ids(&self) -> Result<Vec<String>> {
        let dir = self.sessions_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            if let Some(id) = entry.file_name().to_str().and_then(id_from_file_name) {
                ids.push(id);
            }
        }
        Ok(ids)
    }

    /// A session id from an id, a unique prefix of one, or a session's name. This is the one
    /// place a user's words become a session, so names work wherever ids do.
    pub fn resolve_id(&self, wanted: &str) -> Result<String> {
        let could_be_id = validate_id(wanted).is_ok();
        let could_be_name = validate_name(wanted).is_ok();
        if !could_be_id && !could_be_name {
            bail!(
                Failure::usage(format!("`{wanted}` is not a session id or name"))
                    .hint("ids look like 20261121-101500; list them with `cca sessions`")
            );
        }
        if could_be_id && self.session_path(wanted).is_file() {
            return Ok(wanted.to_string());
        }
        if could_be_name {
            // Names live in the headers; the index has them without reading every transcript.
            let mut named: Vec<String> = self
                .listing()?
                .into_iter()
                .filter(|l| l.name.as_deref() == Some(wanted))
                .map(|l| l.id)
                .collect();
            named.sort();
            match named.len() {
                0 => {}
                1 => return Ok(named.remove(0)),
                n => {
                    return Err(Failure::usage(format!(
                        "{n} sessions are named `{wanted}`: {}",
                        named.join(", ")
                    ))
                    .hint(format!("give an id, or rename one: `cca name {} NEW-NAME`", named[0]))
                    .into());
                }
            }
        }
        let mut matches: Vec<String> = match could_be_id {
            true => self.session_ids()?.into_iter().filter(|id| id.starts_with(wanted)).collect(),
            false => Vec::new(),
        };
        matches.sort();
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(Failure::usage(format!("no session `{wanted}`"))
                .hint("list sessions with `cca sessions`")
                .into()),
            n => {
                let shown: Vec<&str> = matches.iter().take(10).map(String::as_str).collect();
                let more = if n > 10 { format!(" and {} more", n - 10) } else { String::new() };
                Err(Failure::usage(format!("`{wanted}` matches {n} sessions"))
                    .hint(format!("give more of the id: {}{more}", shown.join(", ")))
                    .into())
            }
        }
    }

    /// A session in the trash from its id or a unique prefix of one.
    pub fn resolve_trashed(&self, wanted: &str) -> Result<String> {
        validate_id(wanted)?;
        let mut matches: Vec<String> =
            self.trash_ids().into_iter().filter(|id| id.starts_with(wanted)).collect();
        if let Some(exact) = matches.iter().position(|id| id == wanted) {
            return Ok(matches.swap_remove(exact));
        }
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(Failure::usage(format!("the trash holds no session `{wanted}`"))
                .hint("see what it holds with `cca restore` (no id)")
                .into()),
            n => Err(Failure::usage(format!("`{wanted}` matches {n} sessions in the trash"))
                .hint(format!("give more of the id: {}", matches.join(", ")))
                .into()),
        }
    }

    /// Where a session in the trash is.
    pub fn trashed_path(&self, id: &str) -> PathBuf {
        self.trash_dir().join(file_name(id))
    }

    /// Opens a transcript to read it, wherever it is (in the sessions folder or the trash):
    /// every reader of transcripts opens them here, so a FIFO or a device named like one is
    /// refused, never read (see [`open_regular`]).
    pub fn open_transcript(&self, path: &Path) -> Result<File> {
        open_regular(path, OpenOptions::new().read(true))
            .with_context(|| format!("cannot open {}", path.display()))
    }

    /// Replaces a session's header (to name it) and keeps the rest of the file byte for byte.
    /// `header_end` is where the old header ends. Call under the session's lock; the file is
    /// replaced whole, through a temp file and a rename.
    pub fn rewrite_header(
        &self,
        id: &str,
        header: &transcript::Header,
        header_end: u64,
    ) -> Result<()> {
        self.rewrite_with(id, header, header_end, b"")
    }

    /// As [`Store::rewrite_header`], with `tail` (whole records) after the old body: a new
    /// header and new records appear together or not at all (`cca import` going on).
    pub fn rewrite_with(
        &self,
        id: &str,
        header: &transcript::Header,
        header_end: u64,
        tail: &[u8],
    ) -> Result<()> {
        let path = self.session_path(id);
        let dir = self.sessions_dir();
        let mut temp = tempfile::Builder::new()
            .prefix(".replace-")
            .tempfile_in(&dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        let mut old = self.open_session(id)?;
        temp.write_all(transcript::render_header(header).as_bytes())
            .and_then(|()| old.seek(SeekFrom::Start(header_end)).map(drop))
            .and_then(|()| io::copy(&mut old, temp.as_file_mut()).map(drop))
            .and_then(|()| temp.write_all(tail))
            .and_then(|()| temp.as_file().sync_data())
            .with_context(|| format!("cannot rewrite {}", path.display()))?;
        set_mode(temp.path(), FILE_MODE)?;
        temp.persist(&path).with_context(|| format!("cannot replace {}", path.display()))?;
        sync_dir(&dir);
        Ok(())
    }

    /// Where `cca import` keeps what it read: each source file's size and modification time,
    /// and the session each conversation became.
    pub fn imports_path(&self) -> PathBuf {
        self.home.join("imports.json")
    }

    pub fn read_imports(&self) -> Result<Option<String>> {
        read_optional(&self.imports_path())
    }

    pub fn write_imports(&self, text: &str) -> Result<()> {
        self.ensure()?;
        replace_file(&self.imports_path(), text.as_bytes())
    }

    /// Writes a file where another tool keeps its own (`cca export`): folders made as needed,
    /// the file replaced whole (temp file, fsync, rename) and private.
    pub fn write_beside(&self, path: &Path, contents: &[u8]) -> Result<()> {
        let dir = path.parent().context("a file to write has a folder")?;
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        replace_file(path, contents)
    }

    /// A session's header alone, read from the start of its file (for rebuilding the imports'
    /// index); `None` when the file is not a transcript.
    pub fn header_of(&self, id: &str) -> Option<transcript::Header> {
        let mut head = Vec::new();
        let file = File::open(self.session_path(id)).ok()?;
        io::Read::take(file, HEAD_BYTES).read_to_end(&mut head).ok()?;
        let text = String::from_utf8_lossy(&head);
        let end = text.find("\n<!-- cca:end -->")? + "\n<!-- cca:end -->\n".len();
        transcript::parse(text.get(..end)?).ok().map(|(t, _)| t.header)
    }

    /// Held while a name is checked and given, so two sessions cannot take the same name.
    pub fn lock_names(&self, on_wait: impl FnOnce()) -> Result<SessionLock> {
        // Not a session id (ids never start with a dot), so never a session's lock.
        self.lock(".names", true, on_wait)
    }

    /// Takes the session's lock, the one writer allowed at a time. If another cca holds it,
    /// `on_wait` is called (to say so) and this waits, unless `wait` is false.
    pub fn lock(&self, id: &str, wait: bool, on_wait: impl FnOnce()) -> Result<SessionLock> {
        self.lock_unless(id, wait, on_wait, || Ok(()))
    }

    /// Like [`Self::lock`], but while waiting, gives up with `stop`'s error as soon as it
    /// returns one (the turn was cancelled).
    pub fn lock_unless(
        &self,
        id: &str,
        wait: bool,
        on_wait: impl FnOnce(),
        stop: impl Fn() -> Result<()>,
    ) -> Result<SessionLock> {
        self.ensure()?;
        let path = self.locks_dir().join(format!("{id}.lock"));
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(FILE_MODE)
            .open(&path)
            .with_context(|| format!("cannot open the lock {}", path.display()))?;
        let mut on_wait = Some(on_wait);
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(SessionLock { _file: file }),
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

    /// Opens a session for reading.
    pub fn open_session(&self, id: &str) -> Result<File> {
        self.open_transcript(&self.session_path(id))
    }

    /// Reads a session's summary: header, live context, counts, problems. Call it holding the
    /// session's lock: it reads only what follows the live index's checkpoint where the index
    /// proves the file unchanged, and records a later checkpoint when it finds one.
    pub fn summarize(&self, id: &str) -> Result<Summary> {
        self.read_summary(id, Keep::Checkpoints)
    }

    /// Like [`Self::summarize`], for a summary that records will be appended after (a clear, a
    /// compaction: see [`Appender::append_after`]): the live index also records the file as
    /// read when it has no checkpoint, so that the append can read on from the summary.
    pub fn summarize_to_append(&self, id: &str) -> Result<Summary> {
        self.read_summary(id, Keep::Always)
    }

    /// Like [`Self::summarize`], for a reader that does not hold the lock: it uses the live
    /// index but never writes it.
    pub fn summarize_unlocked(&self, id: &str) -> Result<Summary> {
        self.read_summary(id, Keep::Never)
    }

    /// A session's summary with the offset just past each complete exchange (for forks). Reads
    /// the whole file.
    pub fn summarize_with_ends(&self, id: &str) -> Result<(Summary, Vec<u64>)> {
        let path = self.session_path(id);
        let file = self.open_session(id)?;
        let read = transcript::exchange_ends(BufReader::with_capacity(256 * 1024, file))
            .with_context(|| format!("cannot read {}", path.display()))?;
        read.map_err(|e| not_transcript(&path, id, e))
    }

    fn read_summary(&self, id: &str, keep: Keep) -> Result<Summary> {
        let path = self.session_path(id);
        let cannot_read = || format!("cannot read {}", path.display());
        let mut file = self.open_session(id)?;
        // The stamp is taken before reading: whatever changes the file after it changes the
        // stamp, so an index written with it can only under-promise.
        let stamp = Stamp::of(&file).with_context(cannot_read)?;
        let known = self.read_live_index(id).filter(|index| index.stamp == stamp);
        let from = known.as_ref().and_then(|index| index.checkpoint_in(&file, stamp.size));
        let start = from.map_or(0, |c| c.at.offset);
        file.seek(SeekFrom::Start(start)).with_context(cannot_read)?;
        // Only the bytes the stamp speaks for: a summary and its stamp describe one file.
        let reader = BufReader::with_capacity(256 * 1024, (&file).take(stamp.size - start));
        let scan = transcript::scan(reader, from)
            .with_context(cannot_read)?
            .map_err(|e| not_transcript(&path, id, e))?;
        // Rewritten unless it says just this already (and its checkpoint, if any, was good).
        let at = |c: &Option<Checkpoint>| c.as_ref().map(|c| c.at);
        let current = known.as_ref().is_some_and(|index| {
            at(&index.checkpoint) == at(&scan.checkpoint)
                && index.checkpoint.is_some() == from.is_some()
        });
        // A session never cleared nor compacted has nothing to skip: its turns write nothing.
        let worth = match keep {
            Keep::Never => false,
            Keep::Checkpoints => scan.checkpoint.is_some(),
            Keep::Always => true,
        };
        if worth && !current {
            self.write_live_index(id, &file, stamp, scan.checkpoint);
        }
        Ok(scan.summary)
    }

    /// The session's live index, if there is one that reads.
    fn read_live_index(&self, id: &str) -> Option<LiveIndex> {
        let bytes = fs::read(self.live_index_path(id)).ok()?;
        LiveIndex::decode(&bytes).filter(|index| index.id == id)
    }

    /// Records the transcript's stamp and latest checkpoint (sealed here). A cache: if it cannot
    /// be written, the next turn reads the whole file, as it would without it.
    fn write_live_index(
        &self,
        id: &str,
        file: &File,
        stamp: Stamp,
        checkpoint: Option<Checkpoint>,
    ) {
        let seal = match &checkpoint {
            Some(c) => match seal(file, &c.record) {
                Ok(seal) => seal,
                Err(_) => return,
            },
            None => 0,
        };
        let index =
            LiveIndex { format: LiveIndex::FORMAT, id: id.to_string(), stamp, checkpoint, seal };
        self.keep_live_index(&index);
    }

    /// Writes a live index, in place: it is rewritten at every append, where a temp file and a
    /// rename would cost more than the append (a fraction of a millisecond to a millisecond on
    /// a busy disk, against microseconds), and its checksum makes a copy read half-written, or
    /// left so by a crash, read as none. Writers hold the session's lock.
    fn keep_live_index(&self, index: &LiveIndex) {
        let path = self.live_index_path(&index.id);
        let open = || {
            OpenOptions::new().write(true).create(true).truncate(false).mode(FILE_MODE).open(&path)
        };
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                make_private_dir(&self.live_dir()).ok().and_then(|()| open().ok())
            }
            opened => opened.ok(),
        };
        let Some(file) = file else { return };
        let bytes = index.encode();
        // Not truncated to nothing first: that makes some file systems flush it on close.
        let _ = file.write_all_at(&bytes, 0).and_then(|()| file.set_len(bytes.len() as u64));
    }

    /// A file to tee an answer into as it streams: unnamed, private, gone when dropped.
    /// Called under a session lock, so the folders exist.
    pub fn scratch_file(&self) -> Result<File> {
        tempfile::tempfile_in(self.sessions_dir()).with_context(|| {
            format!("cannot create a scratch file in {}", self.sessions_dir().display())
        })
    }

    /// A private folder for files handed to an engine (system prompt, history); removed on drop.
    /// Called under a session lock, so `CCA_HOME` exists.
    pub fn engine_scratch_dir(&self) -> Result<tempfile::TempDir> {
        tempfile::Builder::new()
            .prefix(".engine-")
            .tempdir_in(&self.home)
            .with_context(|| format!("cannot create a folder in {}", self.home.display()))
    }

    /// `$CCA_HOME/run/`: the endpoints of running turns (steer sockets).
    pub fn run_dir(&self) -> PathBuf {
        self.home.join("run")
    }

    /// Where the turn running in a session listens for steers.
    pub fn steer_socket_path(&self, id: &str) -> PathBuf {
        self.run_dir().join(format!("{id}.sock"))
    }

    /// Makes [`Self::run_dir`] (0700) if it is not there; `steer` checks whose it is.
    pub(crate) fn make_run_dir(&self) -> Result<PathBuf> {
        let path = self.run_dir();
        make_private_dir(&path)?;
        Ok(path)
    }

    /// Where images attached to questions are kept.
    pub fn image_dir(&self) -> PathBuf {
        self.home.join(crate::media::FILES_DIR)
    }

    /// Keeps a copy of an image attached to a question, as `$CCA_HOME/files/NAME` (0600, the
    /// folder 0700), named by its content: a copy already there is the same image. Written to a
    /// temp file and renamed, so a reader never sees half an image.
    pub fn save_image(&self, image: &crate::media::Image) -> Result<PathBuf> {
        let dir = self.image_dir();
        make_private_dir(&dir)?;
        let path = dir.join(image.file_name());
        if fs::metadata(&path).is_ok_and(|m| m.is_file() && m.len() == image.bytes.len() as u64) {
            return Ok(path);
        }
        let mut temp = tempfile::Builder::new()
            .prefix(".image-")
            .tempfile_in(&dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        temp.write_all(&image.bytes)
            .and_then(|()| temp.as_file().sync_data())
            .with_context(|| format!("cannot write {}", path.display()))?;
        set_mode(temp.path(), FILE_MODE)?;
        temp.persist(&path).with_context(|| format!("cannot write {}", path.display()))?;
        sync_dir(&dir);
        Ok(path)
    }

    /// Writes a file inside a folder from [`Self::engine_scratch_dir`].
    pub fn write_private(&self, path: &Path, contents: &[u8]) -> Result<()> {
        let mut file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .mode(FILE_MODE)
            .open(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        file.write_all(contents).with_context(|| format!("cannot write {}", path.display()))
    }
}

/// When reading a summary writes the live index.
#[derive(Debug, Clone, Copy)]
enum Keep {
    Never,
    /// When it has a checkpoint to record.
    Checkpoints,
    Always,
}

/// One session as `cca sessions` shows it. Cached in `$CCA_HOME/index.json` and trusted while
/// the file's size and modification time are unchanged, so listing does not re-read transcripts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Listed {
    pub id: String,
    pub title: String,
    pub created: String,
    pub last_activity: String,
    pub turns: u64,
    pub engine: String,
    pub model: Option<String>,
    pub prompt: String,
    /// The working directory the session started in.
    #[serde(default)]
    pub cwd: String,
    pub forked_from: Option<transcript::ForkedFrom>,
    #[serde(default)]
    pub name: Option<String>,
    /// What its answers cost, as the engines reported it.
    #[serde(default)]
    pub totals: Totals,
    /// Bytes of content sent to the engine on the next turn (before framing).
    pub live_bytes: u64,
    /// The whole file.
    pub full_bytes: u64,
    pub problems: usize,
    /// Set when the file is not a transcript cca can read.
    pub unreadable: Option<String>,
    #[serde(default)]
    mtime_ns: u128,
}

/// The index's layout; an index of another is rebuilt once (2: names and folders; 3: what the
/// answers cost; 4: usage figures that make no sense left out, sums saturated).
const INDEX_FORMAT: u32 = 4;

#[derive(serde::Serialize, serde::Deserialize)]
struct Index {
    format: u32,
    sessions: Vec<Listed>,
}

impl Store {
    /// Every session, from the index where it is current and from the transcript where not.
    pub fn listing(&self) -> Result<Vec<Listed>> {
        let dir = self.sessions_dir();
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e).with_context(|| format!("cannot list {}", dir.display())),
        };
        let mut cached: std::collections::HashMap<String, Listed> =
            read_regular(&self.index_path())
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Index>(&bytes).ok())
                .filter(|index| index.format == INDEX_FORMAT)
                .map(|index| index.sessions.into_iter().map(|l| (l.id.clone(), l)).collect())
                .unwrap_or_default();
        let cached_count = cached.len();
        let (mut listed, mut refreshed) = (Vec::new(), 0usize);
        for entry in entries {
            let entry = entry.with_context(|| format!("cannot list {}", dir.display()))?;
            let Some(id) = entry.file_name().to_str().and_then(id_from_file_name) else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            let mtime_ns = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            match cached.remove(&id) {
                // An error is never taken from the index: its cause (permissions, a file being
                // replaced) may be gone while size and mtime stay the same.
                Some(l)
                    if l.unreadable.is_none()
                        && l.full_bytes == meta.len()
                        && l.mtime_ns == mtime_ns =>
                {
                    listed.push(l)
                }
                _ => {
                    refreshed += 1;
                    listed.push(self.describe(&id, meta.len(), mtime_ns));
                }
            }
        }
        if refreshed > 0 || listed.len() != cached_count {
            // A cache: if it cannot be written (a read-only home), listing still works.
            let index = Index { format: INDEX_FORMAT, sessions: listed.clone() };
            if let Ok(bytes) = serde_json::to_vec(&index) {
                let _ = replace_file(&self.index_path(), &bytes);
            }
        }
        Ok(listed)
    }

    fn describe(&self, id: &str, full_bytes: u64, mtime_ns: u128) -> Listed {
        match self.summarize_unlocked(id) {
            Ok(s) => Listed {
                id: id.to_string(),
                title: s.header.title.clone(),
                created: s.header.created.clone(),
                last_activity: s.last_activity.clone(),
                turns: s.exchanges,
                engine: s.header.engine.clone(),
                model: s.header.model.clone(),
                prompt: s.header.prompt.clone(),
                cwd: s.header.cwd.clone(),
                forked_from: s.header.forked_from.clone(),
                name: s.header.name.clone(),
                totals: s.totals,
                live_bytes: s.live.bytes(),
                full_bytes,
                problems: s.problems.len(),
                unreadable: None,
                mtime_ns,
            },
            Err(e) => Listed {
                id: id.to_string(),
                title: String::new(),
                created: String::new(),
                last_activity: String::new(),
                turns: 0,
                engine: String::new(),
                model: None,
                prompt: String::new(),
                cwd: String::new(),
                forked_from: None,
                name: None,
                totals: Totals::default(),
                live_bytes: 0,
                full_bytes,
                problems: 0,
                unreadable: Some(format!("{e:#}")),
                mtime_ns,
            },
        }
    }

    /// Gives a session that has none a title (a session an editor opened before its first
    /// question). The caller holds the session's lock; the file is replaced atomically.
    pub fn set_title(&self, id: &str, title: &str) -> Result<()> {
        let path = self.session_path(id);
        let text = read_text(&path)?;
        let summary = self.summarize(id)?;
        let header = Header { title: transcript::one_line(title, 80), ..summary.header };
        let rest = text.get(summary.header_end as usize..).unwrap_or("");
        replace_file(&path, (transcript::render_header(&header) + rest).as_bytes())
    }

    /// Deletes a session that is in the trash.
    pub fn purge_trashed(&self, id: &str) -> Result<()> {
        let path = self.trashed_path(id);
        fs::remove_file(&path).with_context(|| format!("cannot delete {}", path.display()))
    }

    /// The header of a session in the trash, if it can be read.
    pub fn trashed_header(&self, id: &str) -> Option<transcript::Header> {
        let file = self.open_transcript(&self.trashed_path(id)).ok()?;
        let summary = transcript::summarize(BufReader::new(file)).ok()?.ok()?;
        Some(summary.header)
    }

    /// Moves a session to `$CCA_HOME/trash/` (or deletes it with `purge`), and keeps `latest`
    /// pointing at a session that exists. Says where `latest` points now, when it pointed at
    /// this session: the next `,` continues another conversation, and the user must know.
    pub fn remove(&self, id: &str, purge: bool) -> Result<Repointed> {
        let path = self.session_path(id);
        if purge {
            fs::remove_file(&path).with_context(|| format!("cannot delete {}", path.display()))?;
        } else {
            make_private_dir(&self.trash_dir())?;
            let to = self.trash_dir().join(file_name(id));
            if to.exists() {
                bail!(
                    Failure::new(exit::ERROR, format!("the trash already holds a session {id}"))
                        .hint(format!(
                            "delete that one first (`rm {}`), or use --purge",
                            to.display()
                        ))
                );
            }
            fs::rename(&path, &to)
                .with_context(|| format!("cannot move {} to the trash", path.display()))?;
        }
        let _ = fs::remove_file(self.locks_dir().join(format!("{id}.lock")));
        let _ = fs::remove_file(self.live_index_path(id));
        if self.latest_target().as_deref() == Some(file_name(id).as_str()) {
            return self.repoint_latest();
        }
        Ok(Repointed::No)
    }

    /// Takes a record cut off at the end of a session's file (from `at` on) out of it, once:
    /// the bytes go whole to a file in [`Self::damaged_dir`], and the transcript ends with a note
    /// between records saying where they went. Returns that file. Call it holding the lock.
    pub fn set_aside_cut_off(&self, id: &str, at: u64, stamp: &str) -> Result<PathBuf> {
        let path = self.session_path(id);
        let file = open_regular(&path, OpenOptions::new().read(true).write(true))
            .with_context(|| format!("cannot open {}", path.display()))?;
        let len = file.metadata().with_context(|| format!("cannot read {}", path.display()))?.len();
        let mut cut = vec![0u8; len.saturating_sub(at) as usize];
        std::os::unix::fs::FileExt::read_exact_at(&file, &mut cut, at)
            .with_context(|| format!("cannot read {}", path.display()))?;
        make_private_dir(&self.damaged_dir())?;
        // A name of its own: an earlier repair in the same second keeps its file (the lock
        // held, no other repair of this session picks a name meanwhile).
        let kept = (1..)
            .map(|n| match n {
                1 => self.damaged_dir().join(format!("{id}-{stamp}.md")),
                n => self.damaged_dir().join(format!("{id}-{stamp}-{n}.md")),
            })
            .find(|path| !path.exists())
            .expect("a free name");
        replace_file(&kept, &cut)?;
        let note = format!(
            "*A record cut off here (cca was stopped while writing it) is kept in {}.*\n",
            kept.display()
        );
        file.set_len(at).with_context(|| format!("cannot repair {}", path.display()))?;
        std::os::unix::fs::FileExt::write_all_at(&file, note.as_bytes(), at)
            .and_then(|()| file.sync_data())
            .with_context(|| format!("cannot repair {}", path.display()))?;
        let _ = fs::remove_file(self.live_index_path(id));
        Ok(kept)
    }

    /// Moves a session back from the trash.
    pub fn restore(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        let from = self.trash_dir().join(file_name(id));
        let to = self.session_path(id);
        if !from.is_file() {
            bail!(
                Failure::usage(format!("the trash holds no session {id}"))
                    .hint("see what it holds with `cca restore` (no id)")
            );
        }
        if to.exists() {
            bail!(Failure::new(exit::ERROR, format!("a session {id} exists already")));
        }
        fs::rename(&from, &to).with_context(|| format!("cannot move {} back", from.display()))?;
        if self.latest()?.is_none() {
            self.set_latest(id)?;
        }
        Ok(())
    }

    /// Ids of the sessions in the trash.
    pub fn trash_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = fs::read_dir(self.trash_dir())
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str().and_then(id_from_file_name))
                    .collect()
            })
            .unwrap_or_default();
        ids.sort_by_key(|id| sort_key(id));
        ids
    }

    /// What `latest` names, without checking it.
    fn latest_target(&self) -> Option<String> {
        match fs::read_link(self.latest_path()) {
            Ok(target) => Some(target.to_string_lossy().into_owned()),
            Err(_) => read_regular(&self.latest_path())
                .ok()
                .map(|t| String::from_utf8_lossy(&t).trim().to_string()),
        }
    }

    /// Points `latest` at the newest remaining session, or removes it when none is left.
    fn repoint_latest(&self) -> Result<Repointed> {
        match self.session_ids()?.into_iter().max_by_key(|id| sort_key(id)) {
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
pub enum Repointed {
    /// It pointed at another session, and still does.
    No,
    /// It pointed at the removed session and now points at this one.
    To(String),
    /// It pointed at the removed session, and no session is left.
    Nowhere,
}

/// Removes the files under `root/*/chats/` that `is_engine_session` recognises: the session
/// file an engine wrote for one of cca's turns. Best effort: what cannot be removed stays.
pub fn remove_engine_session_files(root: &Path, is_engine_session: impl Fn(&Path) -> bool) {
    let Ok(projects) = fs::read_dir(root) else { return };
    for project in projects.flatten() {
        let Ok(chats) = fs::read_dir(project.path().join("chats")) else { continue };
        for file in chats.flatten() {
            let path = file.path();
            if is_engine_session(&path) {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

/// Orders ids by time, then by their same-second counter (`-2` before `-10`).
pub fn sort_key(id: &str) -> (String, u64) {
    let parts: Vec<&str> = id.splitn(3, '-').collect();
    match parts.as_slice() {
        [day, time, n] if n.chars().all(|c| c.is_ascii_digit()) => {
            (format!("{day}-{time}"), n.parse().unwrap_or(0))
        }
        _ => (id.to_string(), 1),
    }
}

/// Held while a session is being read and appended to; released on drop.
#[derive(Debug)]
pub struct SessionLock {
    _file: File,
}

/// Appends records to a session. Use only while holding its [`SessionLock`].
///
/// Each append keeps the session's live index current: cca's own appends leave everything
/// before them as it was, so a checkpoint the index proved before the append still holds after.
pub struct Appender {
    file: File,
    path: PathBuf,
    store: Store,
    id: String,
    /// The open file's device and inode, to notice when another file takes its name.
    identity: (u64, u64),
}

impl Appender {
    pub fn open(store: &Store, id: &str) -> Result<Appender> {
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
    pub fn follow_replacement(&mut self) -> Result<bool> {
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

    /// Whether the file holds these bytes (a record appended before it was replaced). Read
    /// whole, which only a replaced transcript needs.
    pub fn contains(&self, bytes: &[u8]) -> bool {
        let mut text = Vec::new();
        (&self.file)
            .seek(SeekFrom::Start(0))
            .and_then(|_| (&self.file).read_to_end(&mut text))
            .is_ok()
            && memchr::memmem::find(&text, bytes).is_some()
    }

    /// Appends `bytes` with one write and an fsync. If the write fails (disk full), the file is
    /// cut back to where it was, so a failed append leaves nothing half-written.
    pub fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.append_with(|w| w.write_all(bytes))
    }

    /// Like [`Self::append`], for records appended just after `summary` was read (a clear, a
    /// compaction): when nothing came between, the live index then starts the live context at
    /// the last clear or compaction among them, without reading the file again.
    pub fn append_after(&mut self, summary: &Summary, bytes: &[u8]) -> Result<()> {
        self.append_inner(|w| w.write_all(bytes), Some((summary, bytes)))
    }

    /// Like [`Self::append`], for records written in pieces (a large answer streamed from disk).
    pub fn append_with(&mut self, write: impl FnOnce(&mut File) -> io::Result<()>) -> Result<()> {
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

/// `$CCA_HOME/live/ID.json`: the latest checkpoint of a session's transcript (just after its
/// last clear or compaction), and what proves the transcript still holds it.
///
/// The proof is the file's stamp (device, inode, size, modification and change times) as cca
/// last read or appended to it under the session lock, plus a hash of the checkpoint's record;
/// the index itself carries a checksum, so that a copy half-written is no index at all.
/// Any other change to the file (an edit, a truncation, a replacement, an append by anything
/// but a cca holding the lock) changes the stamp, and the next reader reads the whole file, as
/// it would without an index (and records the checkpoint it finds). A change that keeps size, inode and both
/// times can only come in the same clock tick as the stamp was taken; kernels with fine-grained
/// timestamps (Linux 6.13 and later) give such a change a later time too.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct LiveIndex {
    format: u32,
    id: String,
    stamp: Stamp,
    checkpoint: Option<Checkpoint>,
    /// [`seal`] of the checkpoint's record.
    seal: u64,
}

impl LiveIndex {
    /// 2: the checkpoint's totals leave out usage figures that make no sense.
    const FORMAT: u32 = 2;

    /// The file's bytes: a checksum of the JSON, a space, the JSON.
    fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).expect("plain data serializes");
        let mut bytes = format!("{:016x} ", fnv1a(&[&json])).into_bytes();
        bytes.extend_from_slice(&json);
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<LiveIndex> {
        let (sum, json) = bytes.split_at_checked(17)?;
        let sum = std::str::from_utf8(sum.strip_suffix(b" ")?).ok()?;
        (u64::from_str_radix(sum, 16).ok()? == fnv1a(&[json]))
            .then(|| serde_json::from_slice::<LiveIndex>(json).ok())
            .flatten()
            .filter(|index| index.format == Self::FORMAT)
    }

    /// The checkpoint, if the file (whose stamp matched) still has its record where it was.
    fn checkpoint_in(&self, file: &File, size: u64) -> Option<&Checkpoint> {
        let c = self.checkpoint.as_ref()?;
        let fits =
            c.record.start < c.record.end && c.record.end == c.at.offset && c.at.offset <= size;
        (fits && seal(file, &c.record).ok() == Some(self.seal)).then_some(c)
    }
}

/// What identifies a file's contents without reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(file: &File) -> io::Result<Stamp> {
        let m = file.metadata()?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    fn same_file(&self, other: &Stamp) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// A hash of a record's bytes: its first and last 4 KiB, and its length.
fn seal(file: &File, record: &std::ops::Range<u64>) -> io::Result<u64> {
    const PART: u64 = 4096;
    let len = record.end - record.start;
    let mut head = vec![0u8; len.min(PART) as usize];
    file.read_exact_at(&mut head, record.start)?;
    let tail_len = len.min(2 * PART) - len.min(PART);
    let mut tail = vec![0u8; tail_len as usize];
    file.read_exact_at(&mut tail, record.end - tail_len)?;
    Ok(fnv1a(&[&len.to_le_bytes(), &head, &tail]))
}

/// FNV-1a, 64 bits, of the pieces one after the other.
fn fnv1a(pieces: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in pieces.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

pub fn file_name(id: &str) -> String {
    format!("{PREFIX}{id}{SUFFIX}")
}

fn id_from_file_name(name: &str) -> Option<String> {
    let id = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    validate_id(id).ok().map(|()| id.to_string())
}

/// Session ids are plain names: letters, digits, `-` and `_`; never a path.
pub fn validate_id(id: &str) -> Result<()> {
    if !id.is_empty()
        && id.len() <= 128
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Ok(());
    }
    bail!(
        Failure::usage(format!("`{id}` is not a session id"))
            .hint("ids look like 20261121-101500; list them with `cca sessions`")
    )
}

/// Session names: letters, digits, `.`, `-` and `_`, with at least one letter (so a name is
/// never taken for an id, which is digits and dashes), not starting with `.` or `-`.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        && name.chars().any(|c| c.is_ascii_alphabetic())
        && !name.starts_with(['.', '-']);
    if ok {
        return Ok(());
    }
    bail!(Failure::usage(format!("`{name}` cannot be a session name")).hint(
        "a name is up to 64 letters, digits, `.`, `-` and `_`, with a letter, such as rust-locks"
    ))
}

/// The error for a file that is not a transcript, with what to do about it.
pub fn not_transcript(path: &Path, id: &str, e: NotTranscript) -> anyhow::Error {
    let message = format!("{} is not a transcript cca can read ({e})", path.display());
    let hint = if e.not_utf8 {
        format!(
            "cca reads UTF-8 only; if the file was saved as Latin-1, convert it with\n\
             `iconv -f LATIN1 -t UTF-8 \"{p}\" > \"{p}.utf8\" && mv \"{p}.utf8\" \"{p}\"`,\n\
             or fix line {line} by hand; `cca show --raw {id}` prints the file as it is",
            p = path.display(),
            line = e.line,
        )
    } else {
        format!(
            "repair it by hand (`$EDITOR \"{}\"`), or start a new session; the id was {id}",
            path.display()
        )
    };
    Failure::new(exit::ERROR, message).hint(hint).into()
}

fn read_optional(path: &Path) -> Result<Option<String>> {
    match read_regular(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Failure::usage(format!("{} is not UTF-8 text", path.display())).into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Opens a file cca keeps (a transcript, `latest`, the config, the index) only if it is a
/// regular file: a FIFO would block the open or the read forever, and a device such as
/// /dev/zero would never end. O_NONBLOCK keeps the open itself from waiting; on a regular file
/// it changes nothing.
fn open_regular(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32).open(path)?;
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

/// Reads a whole file cca keeps; see [`open_regular`].
fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    open_regular(path, OpenOptions::new().read(true))?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads a text file the user named (a prompt file).
pub fn read_text(path: &Path) -> Result<String> {
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .with_context(|| format!("cannot read {}", path.display()))?;
    String::from_utf8(bytes)
        .map_err(|_| Failure::usage(format!("{} is not UTF-8 text", path.display())).into())
}

fn make_private_dir(dir: &Path) -> Result<()> {
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

/// Replaces a file's contents atomically: temp file in the same folder, fsync, rename.
pub fn replace_file(path: &Path, contents: &[u8]) -> Result<()> {
    let dir = path.parent().context("a file to replace has a folder")?;
    let mut temp = tempfile::Builder::new()
        .prefix(".replace-")
        .tempfile_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    temp.write_all(contents)
        .and_then(|()| temp.as_file().sync_data())
        .with_context(|| format!("cannot write {}", path.display()))?;
    set_mode(temp.path(), FILE_MODE)?;
    temp.persist(path).with_context(|| format!("cannot replace {}", path.display()))?;
    sync_dir(dir);
    Ok(())
}

/// Makes a rename or creation in `dir` durable. Best effort: not every file system allows it.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::testing::record;

    fn header() -> Header {
        crate::transcript::testing::header("t")
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

    #[test]
    fn ids_are_never_paths() {
        for bad in ["", "..", "a/b", "/etc", "a b", "x.md", "../../x"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
        validate_id("20261121-101500-2").unwrap();
        for name in ["rust-locks", "v1.89", "a", "notes_2026", "X"] {
            validate_name(name).unwrap();
        }
        for bad in ["", "2026", "20261121-101500", ".hidden", "-flag", "a/b", "a b", "..", "é"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert!(validate_name(&"a".repeat(65)).is_err());
        assert_eq!(
            id_from_file_name("session_20261121-101500.md").as_deref(),
            Some("20261121-101500")
        );
        assert_eq!(id_from_file_name("session_../x.md"), None);
        assert_eq!(id_from_file_name("latest"), None);
    }

    use std::time::{Duration, UNIX_EPOCH};

    use proptest::prelude::*;

    use crate::transcript::{Header, Kind, Meta, Record};

    fn compaction(through: u64) -> Record {
        Record {
            kind: Kind::Compaction,
            meta: Meta { first: Some(1), through: Some(through), ..Meta::default() },
            content: format!("summary of 1-{through}"),
        }
    }

    fn records(rs: &[Record]) -> String {
        rs.iter().map(|r| transcript::render_record(r, 1)).collect()
    }

    /// A store in a temp folder with one session holding `body` after its header.
    fn session(body: &str) -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        let id = store
            .create_session("20261121-101500", |_| transcript::render_header(&header()) + body)
            .unwrap();
        (dir, store, id)
    }

    /// What reading the whole file gives; `None` when it is not a transcript.
    fn whole(store: &Store, id: &str) -> Option<Summary> {
        let bytes = fs::read(store.session_path(id)).unwrap();
        transcript::summarize(&bytes[..]).unwrap().ok()
    }

    /// A change by another program, at a time of its own (as any later clock tick gives it; see
    /// `LiveIndex` for the one change a stamp cannot see).
    fn by_hand(store: &Store, id: &str, change: impl FnOnce(&Path), n: &mut u64) {
        let path = store.session_path(id);
        change(&path);
        *n += 1;
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000 + *n)).unwrap();
    }

    #[test]
    fn the_live_index_follows_the_last_clear_and_cca_appends() {
        let body = records(&[
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::Clear, ""),
            record(Kind::User, "2"),
            record(Kind::Assistant, "a2"),
        ]);
        let (_dir, store, id) = session(&body);
        assert!(store.read_live_index(&id).is_none());
        // Listing and showing read it, but never write it.
        store.summarize_unlocked(&id).unwrap();
        assert!(store.read_live_index(&id).is_none());

        let summary = store.summarize(&id).unwrap();
        let index = store.read_live_index(&id).unwrap();
        let text = fs::read_to_string(store.session_path(&id)).unwrap();
        let checkpoint = index.checkpoint.clone().unwrap();
        assert_eq!(checkpoint.record.start, text.find("<!-- cca:clear").unwrap() as u64);
        assert_eq!(index.stamp, Stamp::of(&store.open_session(&id).unwrap()).unwrap());

        // A turn's appends keep it current, with the same checkpoint.
        let mut appender = Appender::open(&store, &id).unwrap();
        appender.append(records(&[record(Kind::User, "3")]).as_bytes()).unwrap();
        appender.append(records(&[record(Kind::Assistant, "a3")]).as_bytes()).unwrap();
        let index = store.read_live_index(&id).unwrap();
        assert_eq!(index.checkpoint.as_ref().map(|c| c.at), Some(checkpoint.at));
        assert_eq!(index.stamp, Stamp::of(&store.open_session(&id).unwrap()).unwrap());
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());

        // A clear appended after a summary moves it to the end, without a read.
        let summary_now = store.summarize(&id).unwrap();
        assert_ne!(summary_now, summary);
        appender
            .append_after(&summary_now, records(&[record(Kind::Clear, "")]).as_bytes())
            .unwrap();
        let size = fs::metadata(store.session_path(&id)).unwrap().len();
        let index = store.read_live_index(&id).unwrap();
        assert_eq!(index.checkpoint.as_ref().map(|c| c.at.offset), Some(size));
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());

        // A summary older than the file cannot be read on from: the checkpoint stays.
        appender.append_after(&summary, records(&[compaction(1)]).as_bytes()).unwrap();
        let later = store.read_live_index(&id).unwrap();
        assert_eq!(later.checkpoint.map(|c| c.at), index.checkpoint.map(|c| c.at));
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());

        // Removing the session removes its index.
        store.remove(&id, true).unwrap();
        assert!(!store.live_index_path(&id).exists());
    }

    #[test]
    fn a_session_never_cleared_gets_an_index_at_its_first_clear() {
        let body = records(&[record(Kind::User, "1"), record(Kind::Assistant, "a1")]);
        let (_dir, store, id) = session(&body);
        // Its turns have nothing to skip, and write nothing.
        store.summarize(&id).unwrap();
        let mut appender = Appender::open(&store, &id).unwrap();
        appender.append(records(&[record(Kind::User, "2")]).as_bytes()).unwrap();
        assert!(store.read_live_index(&id).is_none());
        // `cca clear`: the file as read is recorded, then the clear is read on from the summary.
        let summary = store.summarize_to_append(&id).unwrap();
        let index = store.read_live_index(&id).unwrap();
        assert!(index.checkpoint.is_none());
        appender.append_after(&summary, records(&[record(Kind::Clear, "")]).as_bytes()).unwrap();
        let size = fs::metadata(store.session_path(&id)).unwrap().len();
        let index = store.read_live_index(&id).unwrap();
        assert_eq!(index.checkpoint.map(|c| c.at.offset), Some(size));
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());
        // A record cut off at the end (a crash) cannot be read on from: the next read finds the
        // clear instead.
        let (_dir, store, id) = session(&(body + "\n<!-- cca:user -->\n## 2. You\n\ncut"));
        let summary = store.summarize_to_append(&id).unwrap();
        let mut appender = Appender::open(&store, &id).unwrap();
        appender.append_after(&summary, records(&[record(Kind::Clear, "")]).as_bytes()).unwrap();
        assert!(store.read_live_index(&id).unwrap().checkpoint.is_none());
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());
        assert!(store.read_live_index(&id).unwrap().checkpoint.is_some());
    }

    #[test]
    fn a_stale_or_broken_live_index_is_not_trusted() {
        let body = records(&[
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::Clear, ""),
            record(Kind::User, "2"),
            record(Kind::Assistant, "a2"),
        ]);
        let (_dir, store, id) = session(&body);
        store.summarize(&id).unwrap();
        let good = fs::read(store.live_index_path(&id)).unwrap();
        let expected = whole(&store, &id).unwrap();
        let mut index: serde_json::Value = serde_json::from_slice(&good[17..]).unwrap();
        // A checkpoint moved (its stamp still right, its checksum too): its record is not
        // where it says.
        index["checkpoint"]["at"]["offset"] = serde_json::json!(expected.header_end);
        index["checkpoint"]["record"]["start"] = serde_json::json!(expected.header_end - 20);
        index["checkpoint"]["record"]["end"] = serde_json::json!(expected.header_end);
        let moved: LiveIndex = serde_json::from_value(index).unwrap();
        // A copy read while it was being written, or left so by a crash: half of it, or a mix
        // of two versions (here, one that counts other exchanges before the checkpoint).
        let text = String::from_utf8(good.clone()).unwrap();
        assert!(text.contains("\"exchanges\":1,"), "{text}");
        let torn = text.replace("\"exchanges\":1,", "\"exchanges\":7,").into_bytes();
        let forged = [
            moved.encode(),
            torn,
            good[..good.len() / 2].to_vec(),
            good[17..].to_vec(),
            Vec::new(),
            good.clone(),
        ];
        for (n, bytes) in forged.iter().enumerate() {
            fs::write(store.live_index_path(&id), bytes).unwrap();
            assert_eq!(store.summarize_unlocked(&id).unwrap(), expected, "{n}");
            assert_eq!(store.summarize(&id).unwrap(), expected, "{n}");
        }
        // An index of the file as it was before an edit by hand, put back after it.
        let mut n = 0;
        by_hand(
            &store,
            &id,
            |p| {
                let text = fs::read_to_string(p).unwrap().replace("<!-- cca:clear -->", "by hand");
                fs::write(p, text).unwrap();
            },
            &mut n,
        );
        fs::write(store.live_index_path(&id), &good).unwrap();
        let edited = whole(&store, &id).unwrap();
        assert_eq!(edited.live.exchanges.len(), 2);
        assert_eq!(store.summarize(&id).unwrap(), edited);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A turn: its summary read, then its records appended one by one.
        Turn(Vec<Record>),
        /// `cca clear` or `cca compact`: the summary read, then one record appended after it.
        After(Box<Record>),
        /// Bytes at a place replaced by others, in place.
        Edit(prop::sample::Index, usize, String),
        /// One ASCII byte replaced by another: the size stays.
        Retype(prop::sample::Index),
        Truncate(prop::sample::Index),
        /// Text appended by another program.
        Append(String),
        /// The file replaced by a copy (as editors that write a new file and rename it do).
        Replace,
    }

    fn any_record() -> impl Strategy<Value = Record> {
        let kind = prop::sample::select(vec![
            Kind::User,
            Kind::Assistant,
            Kind::Attachment,
            Kind::Failed,
            Kind::Interrupted,
            Kind::Clear,
            Kind::Compaction,
        ]);
        let content = prop::sample::select(vec![
            "",
            "text",
            "<!-- cca:end -->",
            "\\<!-- cca:clear -->\n",
            "```\nopen fence",
        ]);
        (kind, content, 0u64..6).prop_map(|(kind, content, through)| match kind {
            Kind::Compaction => Record { content: content.into(), ..compaction(through) },
            kind => record(kind, content),
        })
    }

    fn any_op() -> impl Strategy<Value = Op> {
        let text = prop::sample::select(vec![
            "x",
            "\n",
            "<!-- cca:clear -->\n",
            "\n<!-- cca:end -->\n",
            "<!-- cca:",
            "a longer piece of text\n",
        ])
        .prop_map(str::to_string);
        prop_oneof![
            4 => prop::collection::vec(any_record(), 1..3).prop_map(Op::Turn),
            3 => any_record().prop_map(|r| Op::After(Box::new(r))),
            1 => (any::<prop::sample::Index>(), 0usize..30, text.clone())
                .prop_map(|(at, len, text)| Op::Edit(at, len, text)),
            1 => any::<prop::sample::Index>().prop_map(Op::Retype),
            1 => any::<prop::sample::Index>().prop_map(Op::Truncate),
            1 => text.prop_map(Op::Append),
            1 => Just(Op::Replace),
        ]
    }

    fn apply(store: &Store, id: &str, op: &Op, n: &mut u64) {
        let text = fs::read_to_string(store.session_path(id)).unwrap();
        let boundary = |at: &prop::sample::Index| {
            let at = at.index(text.len() + 1);
            (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap()
        };
        match op {
            Op::Turn(rs) => {
                let _ = store.summarize(id);
                let mut appender = Appender::open(store, id).unwrap();
                for r in rs {
                    appender.append(records(std::slice::from_ref(r)).as_bytes()).unwrap();
                }
            }
            Op::After(r) => {
                if let Ok(summary) = store.summarize_to_append(id) {
                    let mut appender = Appender::open(store, id).unwrap();
                    appender
                        .append_after(&summary, records(std::slice::from_ref(r)).as_bytes())
                        .unwrap();
                }
            }
            Op::Edit(at, len, insert) => {
                let at = boundary(at);
                let end = (at + len).min(text.len());
                let end = (end..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap();
                let edited = format!("{}{insert}{}", &text[..at], &text[end..]);
                by_hand(store, id, |p| fs::write(p, edited).unwrap(), n);
            }
            Op::Retype(at) => {
                let mut bytes = text.into_bytes();
                let Some(i) = (0..bytes.len())
                    .map(|i| (at.index(bytes.len()) + i) % bytes.len())
                    .find(|&i| bytes[i].is_ascii_graphic())
                else {
                    return;
                };
                bytes[i] = if bytes[i] == b'x' { b'y' } else { b'x' };
                by_hand(store, id, |p| fs::write(p, bytes).unwrap(), n);
            }
            Op::Truncate(at) => {
                let at = boundary(at) as u64;
                by_hand(
                    store,
                    id,
                    |p| OpenOptions::new().write(true).open(p).unwrap().set_len(at).unwrap(),
                    n,
                );
            }
            Op::Append(more) => {
                let mut file =
                    OpenOptions::new().append(true).open(store.session_path(id)).unwrap();
                file.write_all(more.as_bytes()).unwrap();
            }
            Op::Replace => {
                let path = store.session_path(id);
                let copy = path.with_extension("copy");
                fs::write(&copy, &text).unwrap();
                fs::rename(&copy, &path).unwrap();
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever happens to the file (cca's turns, clears and compactions; edits, retyped
        /// bytes, truncations, appends and replacements by others), what is read is what a
        /// read of the whole file gives, with the live index or without it.
        #[test]
        fn what_is_read_is_what_the_file_holds(
            start in prop::collection::vec(any_record(), 0..8),
            ops in prop::collection::vec(any_op(), 1..12),
        ) {
            let (_dir, store, id) = session(&records(&start));
            let mut n = 0;
            for op in &ops {
                apply(&store, &id, op, &mut n);
                let expected = whole(&store, &id);
                prop_assert_eq!(store.summarize_unlocked(&id).ok(), expected.clone(), "{:?}", op);
                prop_assert_eq!(store.summarize(&id).ok(), expected.clone(), "{:?}", op);
                prop_assert_eq!(store.summarize(&id).ok(), expected, "{:?}", op);
            }
        }
    }
}
