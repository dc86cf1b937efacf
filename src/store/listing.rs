//! What `cca sessions` lists: one line per session, cached in `index.json` and trusted for a
//! file while its size and modification time are unchanged.

use std::fs;
use std::io;

use anyhow::{Context, Result};

use crate::transcript::{self, Totals};

use super::Store;
use super::files::{read_regular, replace_file};
use super::ids::{id_from_file_name, sort_key};

/// One session as `cca sessions` shows it. Cached in `$CCA_HOME/index.json` and trusted while
/// the file's size and modification time are unchanged, so listing does not re-read transcripts.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Listed {
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
/// answers cost; 4: usage figures that make no sense left out, sums saturated; 5: a fork's last
/// activity is no earlier than its creation).
const INDEX_FORMAT: u32 = 5;

#[derive(serde::Serialize, serde::Deserialize)]
struct Index {
    format: u32,
    sessions: Vec<Listed>,
}

/// Sorts sessions as `cca sessions` lists them and `latest` moves: the most recently active
/// first (a fork is active from its creation), the newer id first on a tie.
pub(crate) fn newest_first(listed: &mut [Listed]) {
    listed.sort_by_cached_key(|l| std::cmp::Reverse((l.last_activity.clone(), sort_key(&l.id))));
}

impl Store {
    /// Every session, from the index where it is current and from the transcript where not.
    pub(crate) fn listing(&self) -> Result<Vec<Listed>> {
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
            // A session file that is a link is listed as the file it points at.
            let meta = match entry.file_type() {
                Ok(t) if t.is_symlink() => fs::metadata(entry.path()),
                _ => entry.metadata(),
            };
            let Ok(meta) = meta else { continue };
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
}
