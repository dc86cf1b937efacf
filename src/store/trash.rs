//! Removing sessions: to `trash/` and back, deleted for good, a cut-off record set aside in
//! `damaged/`, and the session files engines wrote for cca's turns.

use std::fs::{self, OpenOptions};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::error::{Failure, exit};
use crate::transcript;

use super::Store;
use super::files::{make_private_dir, open_regular, replace_file};
use super::ids::{file_name, id_from_file_name, id_or_name, sort_key, validate_id};
use super::latest::Repointed;

impl Store {
    /// Where a session in the trash is.
    pub(crate) fn trashed_path(&self, id: &str) -> PathBuf {
        self.trash_dir().join(file_name(id))
    }

    /// A session in the trash from its id, a unique prefix of one, or its name (the newest
    /// session in the trash with that name), as [`Store::resolve_id`] finds a live one.
    pub(crate) fn resolve_trashed(&self, wanted: &str) -> Result<String> {
        let (could_be_id, could_be_name) =
            id_or_name(wanted, "see what the trash holds with `cca restore` (no id)")?;
        let trash = self.trash_ids();
        let mut matches: Vec<String> = match could_be_id {
            true => trash.iter().filter(|id| id.starts_with(wanted)).cloned().collect(),
            false => Vec::new(),
        };
        if let Some(exact) = matches.iter().position(|id| id == wanted) {
            return Ok(matches.swap_remove(exact));
        }
        // A whole id is that session's only (`ids::is_whole_id`).
        match if super::ids::is_whole_id(wanted) { 0 } else { matches.len() } {
            1 => return Ok(matches.remove(0)),
            0 => {}
            n => bail!(
                Failure::usage(format!("`{wanted}` matches {n} sessions in the trash"))
                    .hint(format!("give more of the id: {}", matches.join(", ")))
            ),
        }
        let named = could_be_name.then(|| {
            trash.iter().rev().find(|id| {
                self.trashed_header(id).is_some_and(|h| h.name.as_deref() == Some(wanted))
            })
        });
        match named.flatten() {
            Some(id) => Ok(id.clone()),
            None => Err(Failure::usage(format!("the trash holds no session `{wanted}`"))
                .hint("see what it holds with `cca restore` (no id)")
                .into()),
        }
    }

    /// Deletes a session that is in the trash.
    pub(crate) fn purge_trashed(&self, id: &str) -> Result<()> {
        delete_entry(&self.trashed_path(id))
    }

    /// The header of a session in the trash, if it can be read.
    pub(crate) fn trashed_header(&self, id: &str) -> Option<transcript::Header> {
        let file = self.open_transcript(&self.trashed_path(id)).ok()?;
        let summary = transcript::summarize(BufReader::new(file)).ok()?.ok()?;
        Some(summary.header)
    }

    /// Moves a session to `$CCA_HOME/trash/` (or deletes it with `purge`), and keeps `latest`
    /// pointing at a session that exists. Says where `latest` points now, when it pointed at
    /// this session: the next `,` continues another conversation, and the user must know.
    pub(crate) fn remove(&self, id: &str, purge: bool) -> Result<Repointed> {
        let path = self.session_path(id);
        // However `latest` names it (a relative or an absolute link, made by hand).
        let was_latest = matches!(self.latest(), Ok(Some(latest)) if latest == id);
        if purge {
            delete_entry(&path)?;
        } else {
            make_private_dir(&self.trash_dir())?;
            let to = self.trash_dir().join(file_name(id));
            if to.exists() {
                bail!(
                    Failure::new(exit::ERROR, format!("the trash already holds a session {id}"))
                        .hint(format!(
                            "delete that one first (`rm {}`), or use --purge",
                            crate::human::shell_word(&to.to_string_lossy())
                        ))
                );
            }
            fs::rename(&path, &to)
                .with_context(|| format!("cannot move {} to the trash", path.display()))?;
        }
        let _ = fs::remove_file(self.locks_dir().join(format!("{id}.lock")));
        let _ = fs::remove_file(self.live_index_path(id));
        self.remove_engine_homes(id);
        let notes = format!("{id}.");
        for entry in fs::read_dir(self.live_dir()).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&notes) && name.ends_with("-notes.json") {
                let _ = fs::remove_file(entry.path());
            }
        }
        if was_latest || self.latest_target().as_deref() == Some(file_name(id).as_str()) {
            return self.repoint_latest();
        }
        Ok(Repointed::No)
    }

    /// Takes a record cut off at the end of a session's file (from `at` on) out of it, once:
    /// the bytes go whole to a file in [`Self::damaged_dir`], and the transcript ends with a note
    /// between records saying where they went. Returns that file. Call it holding the lock.
    pub(crate) fn set_aside_cut_off(&self, id: &str, at: u64, stamp: &str) -> Result<PathBuf> {
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
    pub(crate) fn restore(&self, id: &str) -> Result<()> {
        self.can_restore(id)?;
        let (from, to) = (self.trash_dir().join(file_name(id)), self.session_path(id));
        fs::rename(&from, &to).with_context(|| format!("cannot move {} back", from.display()))?;
        // With no `latest`, or one naming a session that is gone, the restored one is latest.
        if !matches!(self.latest(), Ok(Some(_))) {
            self.set_latest(id)?;
        }
        Ok(())
    }

    /// Whether session `id` can come back from the trash: it is there, and no session of its
    /// id is live; `Err` says why not.
    pub(crate) fn can_restore(&self, id: &str) -> Result<()> {
        validate_id(id)?;
        // Whatever `rm` moved there comes back: a FIFO, a folder or a link named like a session.
        if fs::symlink_metadata(self.trash_dir().join(file_name(id))).is_err() {
            bail!(
                Failure::usage(format!("the trash holds no session {id}"))
                    .hint("see what it holds with `cca restore` (no id)")
            );
        }
        if self.session_path(id).exists() {
            bail!(Failure::new(exit::ERROR, format!("a session {id} exists already")));
        }
        Ok(())
    }

    /// Ids of the sessions in the trash.
    pub(crate) fn trash_ids(&self) -> Vec<String> {
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
}

/// Deletes what is at `path` under a session's name: a file, a link, a FIFO, or a folder when
/// it is empty (one holding anything is not cca's to delete: said, with its path).
fn delete_entry(path: &Path) -> Result<()> {
    let is_dir = fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
    let deleted = if is_dir { fs::remove_dir(path) } else { fs::remove_file(path) };
    deleted.with_context(|| format!("cannot delete {}", path.display()))
}

/// Reads and removes the file `name` in a folder of `root` (claude's
/// `~/.claude/projects/<folder>/<session id>.jsonl`), if one holds it.
pub(crate) fn take_engine_session_file(root: &Path, name: &str) -> Option<String> {
    for folder in fs::read_dir(root).ok()?.flatten() {
        let path = folder.path().join(name);
        if let Ok(text) = fs::read_to_string(&path) {
            let _ = fs::remove_file(&path);
            return Some(text);
        }
    }
    None
}

/// Reads and removes the first file whose name `wanted` accepts, `depth` folders below `root`
/// (codex's `sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`), if there is one.
pub(crate) fn take_file_below(
    root: &Path,
    depth: usize,
    wanted: impl Fn(&str) -> bool + Copy,
) -> Option<String> {
    for entry in fs::read_dir(root).ok()?.flatten() {
        let path = entry.path();
        let found = match depth {
            0 => entry
                .file_name()
                .to_str()
                .is_some_and(wanted)
                .then(|| fs::read_to_string(&path).ok())
                .flatten()
                .inspect(|_| drop(fs::remove_file(&path))),
            _ => take_file_below(&path, depth - 1, wanted),
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Removes the files directly in `dir` whose names `wanted` accepts (the rollouts cca wrote for
/// codex that no run took), if there are any.
pub(crate) fn remove_files_in(dir: &Path, wanted: impl Fn(&str) -> bool) {
    for entry in fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_name().to_str().is_some_and(&wanted) {
            let _ = fs::remove_file(entry.path());
        }
    }
}
