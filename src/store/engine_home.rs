//! An engine's home for a run (what goes in it is the engine's to say: `engine::home`): made in
//! the run's folder of files, so it is removed with them, whatever the engine wrote in it.

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{DIR_MODE, Store};

/// A settings file's text, given the user's file's text if there is one.
pub(crate) type SettingsText<'a> = &'a dyn Fn(Option<&str>) -> String;

/// What goes in an engine's home, as the engine says.
pub(crate) struct EngineHome<'a> {
    /// The configuration folder's name, in the home made as in the user's (`.gemini`).
    pub config_dir: &'a str,
    /// Entries of the user's configuration folder not linked.
    pub own: &'a [&'a str],
    /// Files in the user's home itself linked where they are.
    pub home_files: &'a [&'a str],
    /// The settings file's name, and its text given the user's: written, not linked.
    pub settings: Option<(&'a str, SettingsText<'a>)>,
}

impl Store {
    /// Makes `at` a home for the engine: its configuration folder holding a link to each entry
    /// of the user's (in `user_home`) but the engine's own and the settings, the settings
    /// written, and links to the user's home files. Returns `at`.
    pub(crate) fn make_engine_home(
        &self,
        at: &Path,
        home: &EngineHome,
        user_home: Option<&Path>,
    ) -> Result<PathBuf> {
        let config = at.join(home.config_dir);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(&config)
            .with_context(|| format!("cannot create {}", config.display()))?;
        let user_config = user_home.map(|h| h.join(home.config_dir));
        let settings_file = home.settings.map(|(file, _)| file);
        let entries = user_config.as_deref().and_then(|dir| fs::read_dir(dir).ok());
        for entry in entries.into_iter().flatten().flatten() {
            let name = entry.file_name();
            let skipped = home.own.iter().chain(&settings_file).any(|own| name == **own);
            if !skipped {
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
            self.write_private(&config.join(file), text(user.as_deref()).as_bytes())?;
        }
        Ok(at.to_path_buf())
    }
}

fn link(target: &Path, at: &Path) -> Result<()> {
    std::os::unix::fs::symlink(target, at)
        .with_context(|| format!("cannot link {} to {}", at.display(), target.display()))
}
