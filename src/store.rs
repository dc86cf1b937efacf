//! Every file-system effect cca has: the `CCA_HOME` layout, session files, the `latest` link,
//! locks, appends, atomic replacement, and permissions.
//!
//! Rules kept here so no other module has to know them: directories are 0700 and files 0600
//! whatever the umask; appends are one write plus fsync under the session lock; anything
//! rewritten goes through a temp file in the same directory and a rename; reading never creates.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::error::{Failure, exit};
use crate::transcript::{self, NotTranscript, Summary};

pub const DIR_MODE: u32 = 0o700;
pub const FILE_MODE: u32 = 0o600;
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

    fn index_path(&self) -> PathBuf {
        self.home.join("index.json")
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
        for dir in [self.home.clone(), self.sessions_dir()] {
            let Ok(entries) = fs::read_dir(&dir) else { continue };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if [".new-session-", ".latest-", ".engine-", ".replace-"]
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
        self.ensure()?;
        let dir = self.sessions_dir();
        for n in 1u32.. {
            let id = if n == 1 { stamp.to_string() } else { format!("{stamp}-{n}") };
            // Taken names are skipped cheaply; the no-clobber rename settles any race.
            if self.session_path(&id).exists() {
                continue;
            }
            let mut temp = tempfile::Builder::new()
                .prefix(".new-session-")
                .tempfile_in(&dir)
                .with_context(|| format!("cannot create a file in {}", dir.display()))?;
            temp.write_all(contents(&id).as_bytes())
                .and_then(|()| temp.as_file().sync_data())
                .with_context(|| format!("cannot write a new session in {}", dir.display()))?;
            set_mode(temp.path(), FILE_MODE)?;
            match temp.persist_noclobber(self.session_path(&id)) {
                Ok(_) => {
                    sync_dir(&dir);
                    return Ok(id);
                }
                Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e.error).with_context(|| {
                        format!("cannot create {}", self.session_path(&id).display())
                    });
                }
            }
        }
        unreachable!("the loop returns")
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
                fs::read_to_string(&link)
                    .with_context(|| format!("cannot read {}", link.display()))?
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
        let Some(id) = target.to_str().and_then(id_from_file_name) else {
            return Err(bad("which is not a session file in this folder").into());
        };
        if !self.session_path(&id).is_file() {
            return Err(bad("which does not exist").into());
        }
        Ok(Some(id))
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

    /// A session id from an id or a unique prefix of one.
    pub fn resolve_id(&self, wanted: &str) -> Result<String> {
        validate_id(wanted)?;
        if self.session_path(wanted).is_file() {
            return Ok(wanted.to_string());
        }
        let mut matches: Vec<String> =
            self.session_ids()?.into_iter().filter(|id| id.starts_with(wanted)).collect();
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
        let path = self.session_path(id);
        File::open(&path).with_context(|| format!("cannot open {}", path.display()))
    }

    /// Reads a session's summary: header, live context, counts, problems.
    pub fn summarize(&self, id: &str) -> Result<Summary> {
        let path = self.session_path(id);
        let file = self.open_session(id)?;
        let summary = transcript::summarize(BufReader::with_capacity(256 * 1024, file))
            .with_context(|| format!("cannot read {}", path.display()))?;
        summary.map_err(|e| not_transcript(&path, id, e))
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

    /// Listens for steers to the turn running in a session. Called under the session lock, so a
    /// socket already there is a stale one (its cca died): it is removed. The folder is 0700 and
    /// must be this user's; the socket goes away when the returned guard is dropped.
    pub fn listen_steer(&self, id: &str) -> Result<SteerSocket> {
        let dir = self.run_dir();
        make_private_dir(&dir)?;
        let meta =
            fs::symlink_metadata(&dir).with_context(|| format!("cannot read {}", dir.display()))?;
        check_private_dir(&dir, &meta, rustix::process::geteuid().as_raw())?;
        if meta.permissions().mode() & 0o777 != DIR_MODE {
            set_mode(&dir, DIR_MODE)?;
        }
        let path = self.steer_socket_path(id);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", path.display()));
            }
            _ => {}
        }
        let listener = UnixListener::bind(&path)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        set_mode(&path, FILE_MODE)?;
        Ok(SteerSocket { listener, path })
    }

    /// Connects to the turn running in a session; `None` when none runs there (no socket, or a
    /// stale one whose cca died: connecting is refused; the next turn there removes it).
    pub fn connect_steer(&self, id: &str) -> Result<Option<UnixStream>> {
        let path = self.steer_socket_path(id);
        match UnixStream::connect(&path) {
            Ok(stream) => Ok(Some(stream)),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e).with_context(|| format!("cannot connect to {}", path.display())),
        }
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

/// A listening steer socket; removed from the file system when dropped.
#[derive(Debug)]
pub struct SteerSocket {
    pub listener: UnixListener,
    pub path: PathBuf,
}

impl Drop for SteerSocket {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

/// The steer folder must belong to this user: a folder another user owns could hold their
/// socket, or let them swap ours.
pub fn check_private_dir(dir: &Path, meta: &fs::Metadata, uid: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    if !meta.is_dir() || meta.uid() != uid {
        return Err(Failure::new(
            exit::ERROR,
            format!("{} is not a folder of this user (uid {uid})", dir.display()),
        )
        .hint(format!("remove it (`rm -r {}`); cca makes it again", dir.display()))
        .into());
    }
    Ok(())
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
    pub forked_from: Option<transcript::ForkedFrom>,
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
        let mut cached: std::collections::HashMap<String, Listed> = fs::read(self.index_path())
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Index>(&bytes).ok())
            .filter(|index| index.format == 1)
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
                Some(l) if l.full_bytes == meta.len() && l.mtime_ns == mtime_ns => listed.push(l),
                _ => {
                    refreshed += 1;
                    listed.push(self.describe(&id, meta.len(), mtime_ns));
                }
            }
        }
        if refreshed > 0 || listed.len() != cached_count {
            // A cache: if it cannot be written (a read-only home), listing still works.
            let index = Index { format: 1, sessions: listed.clone() };
            if let Ok(bytes) = serde_json::to_vec(&index) {
                let _ = replace_file(&self.index_path(), &bytes);
            }
        }
        Ok(listed)
    }

    fn describe(&self, id: &str, full_bytes: u64, mtime_ns: u128) -> Listed {
        match self.summarize(id) {
            Ok(s) => Listed {
                id: id.to_string(),
                title: s.header.title.clone(),
                created: s.header.created.clone(),
                last_activity: s.last_activity.clone(),
                turns: s.exchanges,
                engine: s.header.engine.clone(),
                model: s.header.model.clone(),
                prompt: s.header.prompt.clone(),
                forked_from: s.header.forked_from.clone(),
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
                forked_from: None,
                live_bytes: 0,
                full_bytes,
                problems: 0,
                unreadable: Some(format!("{e:#}")),
                mtime_ns,
            },
        }
    }

    /// Moves a session to `$CCA_HOME/trash/` (or deletes it with `purge`), and keeps `latest`
    /// pointing at a session that exists.
    pub fn remove(&self, id: &str, purge: bool) -> Result<()> {
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
        if self.latest_target().as_deref() == Some(file_name(id).as_str()) {
            self.repoint_latest()?;
        }
        Ok(())
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
            Err(_) => fs::read_to_string(self.latest_path()).ok().map(|t| t.trim().to_string()),
        }
    }

    /// Points `latest` at the newest remaining session, or removes it when none is left.
    fn repoint_latest(&self) -> Result<()> {
        match self.session_ids()?.into_iter().max_by_key(|id| sort_key(id)) {
            Some(newest) => self.set_latest(&newest),
            None => match fs::remove_file(self.latest_path()) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e)
                    .with_context(|| format!("cannot remove {}", self.latest_path().display())),
                _ => Ok(()),
            },
        }
    }
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
pub struct Appender {
    file: File,
    path: PathBuf,
}

impl Appender {
    pub fn open(store: &Store, id: &str) -> Result<Appender> {
        let path = store.session_path(id);
        let file = OpenOptions::new()
            .append(true)
            .open(&path)
            .with_context(|| format!("cannot open {} to append", path.display()))?;
        Ok(Appender { file, path })
    }

    /// Appends `bytes` with one write and an fsync. If the write fails (disk full), the file is
    /// cut back to where it was, so a failed append leaves nothing half-written.
    pub fn append(&mut self, bytes: &[u8]) -> Result<()> {
        self.append_with(|w| w.write_all(bytes))
    }

    /// Like [`Self::append`], for records written in pieces (a large answer streamed from disk).
    pub fn append_with(&mut self, write: impl FnOnce(&mut File) -> io::Result<()>) -> Result<()> {
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
        Ok(())
    }
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

fn not_transcript(path: &Path, id: &str, e: NotTranscript) -> anyhow::Error {
    Failure::new(exit::ERROR, format!("{} is not a transcript cca can read ({e})", path.display()))
        .hint(format!(
            "repair it by hand (`$EDITOR \"{}\"`), or start a new session; the id was {id}",
            path.display()
        ))
        .into()
}

fn read_optional(path: &Path) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| Failure::usage(format!("{} is not UTF-8 text", path.display())).into()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
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

fn set_mode(path: &Path, mode: u32) -> Result<()> {
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

    #[test]
    fn ids_are_never_paths() {
        for bad in ["", "..", "a/b", "/etc", "a b", "x.md", "../../x"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
        validate_id("20261121-101500-2").unwrap();
        assert_eq!(
            id_from_file_name("session_20261121-101500.md").as_deref(),
            Some("20261121-101500")
        );
        assert_eq!(id_from_file_name("session_../x.md"), None);
        assert_eq!(id_from_file_name("latest"), None);
    }
}
