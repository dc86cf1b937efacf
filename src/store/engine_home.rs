//! An engine's home (what goes in it is the engine's to say: `engine::home`): one per session,
//! `engines/NAME/ID/`, kept from turn to turn so that its path, which gemini writes into the
//! context it sends, stays the same and a follow-up extends the request before it; made afresh
//! for each start (links and settings), and removed with the session. Where there is no
//! session (`cca doctor`), one for the run, in its folder of files.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};

use super::files::replace_file;
use super::{DIR_MODE, Store};

/// How long an engine's own copy of a conversation kept warm (whose file no turn removes) is left
/// in its home: one not written for this long belongs to an engine long gone.
const STALE: Duration = Duration::from_secs(24 * 60 * 60);

/// A settings file's text, given the user's file's text if there is one.
pub(crate) type SettingsText<'a> = &'a dyn Fn(Option<&str>) -> String;

/// What goes in an engine's home, as the engine says.
pub(crate) struct EngineHome<'a> {
    /// The configuration folder's name, in the home made as in the user's (`.gemini`).
    pub config_dir: &'a str,
    /// Whether an entry of the user's configuration folder is linked.
    pub linked: &'a dyn Fn(&std::ffi::OsStr) -> bool,
    /// Files in the user's home itself linked where they are.
    pub home_files: &'a [&'a str],
    /// The settings file's name, and its text given the user's: written, not linked.
    pub settings: Option<(&'a str, SettingsText<'a>)>,
}

impl Store {
    /// The home of engine `name` for session `id`.
    pub(crate) fn engine_home_dir(&self, name: &str, id: &str) -> PathBuf {
        self.home.join("engines").join(name).join(id)
    }

    /// Removes every engine's home for session `id` (it is removed). Best effort: a cache.
    pub(crate) fn remove_engine_homes(&self, id: &str) {
        let engines = fs::read_dir(self.home.join("engines")).into_iter().flatten().flatten();
        for engine in engines {
            let _ = fs::remove_dir_all(engine.path().join(id));
        }
    }

    /// Makes `at` a home for the engine, or makes it afresh: its configuration folder holding a
    /// link to each entry of the user's (`user_config`) but the engine's own and the settings,
    /// the settings written, and links to the user's home files (in `user_home`). What the engine wrote of its
    /// own stays, but for copies of conversations not written for a day. Returns `at`.
    pub(crate) fn make_engine_home(
        &self,
        at: &Path,
        home: &EngineHome,
        user_home: Option<&Path>,
        user_config: Option<&Path>,
    ) -> Result<PathBuf> {
        let config = at.join(home.config_dir);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&config)
            .with_context(|| format!("cannot create {}", config.display()))?;
        let settings_file = home.settings.map(|(file, _)| file);
        let is_settings = |name: &std::ffi::OsStr| settings_file.is_some_and(|f| name == f);
        // What an earlier start linked: the user's folder may have changed since.
        for entry in fs::read_dir(&config).into_iter().flatten().flatten() {
            let name = entry.file_name();
            if (home.linked)(&name) || is_settings(&name) {
                remove_entry(&entry.path())?;
            }
        }
        for name in home.home_files {
            remove_entry(&at.join(name))?;
        }
        let entries = user_config.and_then(|dir| fs::read_dir(dir).ok());
        for entry in entries.into_iter().flatten().flatten() {
            let name = entry.file_name();
            if (home.linked)(&name) && !is_settings(&name) {
                link(&entry.path(), &config.join(&name))?;
            }
        }
        for name in home.home_files {
            let target = user_home.map(|h| h.join(name));
            if let Some(target) = target.filter(|t| t.exists()) {
                link(&target, &at.join(name))?;
            }
        }
        if let Some((file, text)) = home.settings {
            // The user's may be a link (to a dotfiles repository): followed, as gemini does.
            let user = user_config.and_then(|dir| fs::read_to_string(dir.join(file)).ok());
            replace_file(&config.join(file), text(user.as_deref()).as_bytes())?;
        }
        remove_stale(&config.join("tmp"));
        Ok(at.to_path_buf())
    }
}

/// Removes a file or a link (never what it points to), if there is one.
fn remove_entry(path: &Path) -> Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(_) => return Ok(()),
    }
    .with_context(|| format!("cannot remove {}", path.display()))
}

/// Removes the copies of conversations under `tmp/*/chats/` not written for [`STALE`]: those of
/// engines kept warm, which no turn removes. Best effort.
fn remove_stale(tmp: &Path) {
    let now = SystemTime::now();
    for project in fs::read_dir(tmp).into_iter().flatten().flatten() {
        for file in fs::read_dir(project.path().join("chats")).into_iter().flatten().flatten() {
            let written = file.metadata().and_then(|m| m.modified());
            if written.is_ok_and(|w| now.duration_since(w).unwrap_or_default() > STALE) {
                let _ = fs::remove_file(file.path());
            }
        }
    }
}

/// Removes the files under `root/*/chats/` that `is_engine_session` recognises: the copy of a
/// conversation an engine wrote for one of cca's turns. Best effort: what cannot be removed
/// stays.
pub(crate) fn remove_engine_session_files(root: &Path, is_engine_session: impl Fn(&Path) -> bool) {
    for project in fs::read_dir(root).into_iter().flatten().flatten() {
        for file in fs::read_dir(project.path().join("chats")).into_iter().flatten().flatten() {
            let path = file.path();
            if is_engine_session(&path) {
                let _ = fs::remove_file(&path);
            }
        }
    }
}

fn link(target: &Path, at: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, at)
        .with_context(|| format!("cannot link {} to {}", at.display(), target.display()))
}
