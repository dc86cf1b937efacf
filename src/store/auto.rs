//! What `cca import --auto` keeps and edits: another tool's settings file, changed in place
//! (through a link to the file it points at, its permissions kept, replaced whole), and under
//! `$CCA_HOME/auto/` a record per tool of what its file was before cca's hook went in and what
//! cca wrote, so that `off` gives the user's bytes back exactly. Also the hooks' log, where a
//! hook's import in the background says what it did.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::files::{
    make_private_dir, read_optional, replace_file, set_mode, sync_dir, temp_file, through_links,
};
use super::{DIR_MODE, FILE_MODE, Store};

impl Store {
    fn auto_dir(&self) -> PathBuf {
        self.home.join("auto")
    }

    fn auto_record_path(&self, tool: &str) -> PathBuf {
        self.auto_dir().join(format!("{tool}.json"))
    }

    pub(crate) fn hook_log_path(&self) -> PathBuf {
        self.auto_dir().join("hooks.log")
    }

    /// What cca noted when it put its hook in `tool`'s settings, if it did.
    pub(crate) fn auto_record(&self, tool: &str) -> Result<Option<String>> {
        read_optional(&self.auto_record_path(tool))
    }

    pub(crate) fn keep_auto_record(&self, tool: &str, text: &str) -> Result<()> {
        self.ensure()?;
        make_private_dir(&self.auto_dir())?;
        replace_file(&self.auto_record_path(tool), text.as_bytes())
    }

    pub(crate) fn forget_auto_record(&self, tool: &str) -> Result<()> {
        remove_if_there(&self.auto_record_path(tool))
    }

    /// The hooks' log, opened to append ([`super::files::open_log`]).
    pub(crate) fn hook_log(&self) -> Result<File> {
        self.ensure()?;
        make_private_dir(&self.auto_dir())?;
        super::files::open_log(&self.hook_log_path())
    }
}

/// Another tool's settings file: its text, or `None` when there is none.
pub(crate) fn read_settings(path: &Path) -> Result<Option<String>> {
    read_optional(path)
}

/// Writes another tool's settings file whole: a link is followed (the file it points at is
/// the one replaced, so a dotfiles repository keeps its link), the file keeps its permissions
/// (a new one is private), and folders are made as needed.
pub(crate) fn write_settings(path: &Path, text: &str) -> Result<()> {
    settings_writable(path)?;
    let target = through_links(path);
    let mode = fs::metadata(&target).map_or(FILE_MODE, |m| m.permissions().mode() & 0o7777);
    let dir = target.parent().context("a settings file has a folder")?;
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    let mut temp = temp_file(dir, ".cca-")?;
    temp.write_all(text.as_bytes())
        .and_then(|()| temp.as_file().sync_data())
        .with_context(|| format!("cannot write {}", target.display()))?;
    set_mode(temp.path(), mode)?;
    temp.persist(&target).with_context(|| format!("cannot replace {}", target.display()))?;
    sync_dir(dir);
    Ok(())
}

/// Refuses a settings file this user may not write (read-only, or another user's): cca
/// replaces it by renaming a new file over it, which the folder's permission alone allows.
pub(crate) fn settings_writable(path: &Path) -> Result<()> {
    let target = through_links(path);
    if target.exists() && rustix::fs::access(&target, rustix::fs::Access::WRITE_OK).is_err() {
        return Err(crate::error::Failure::new(
            crate::error::exit::ERROR,
            format!("{} is read-only for you; left alone", target.display()),
        )
        .hint("make it writable (`chmod u+w FILE`, or as its owner) and run the command again, or edit it by hand")
        .into());
    }
    // Renaming a new file over another user's would make it this user's (root's, under
    // sudo), and the tool could no longer read its own settings: left alone, as is a new
    // file in another user's folder.
    let me = rustix::process::geteuid().as_raw();
    let place = match target.exists() {
        true => Some(target.as_path()),
        false => target.parent(),
    };
    let owned = place.and_then(|p| {
        let owner = fs::metadata(p).ok()?.uid();
        (owner != me).then(|| (p.to_path_buf(), owner))
    });
    if let Some((place, owner)) = owned {
        return Err(crate::error::Failure::new(
            crate::error::exit::ERROR,
            format!("{} belongs to another user (uid {owner}); left alone", place.display()),
        )
        .hint("run the command as that user, without sudo")
        .into());
    }
    Ok(())
}

/// Removes another tool's settings file that cca made (and the user never had): the file a
/// link points at, not the link, which the user had.
pub(crate) fn remove_settings(path: &Path) -> Result<()> {
    remove_if_there(&through_links(path))
}

fn remove_if_there(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("cannot remove {}", path.display()))
        }
        _ => Ok(()),
    }
}
