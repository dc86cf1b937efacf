//! Engines kept warm between turns by the front ends that outlive a turn (`cca chat`, `cca
//! acp`): one per session, a cache of the transcript, never the other way round (docs/DESIGN.md,
//! "Warm engines").
//!
//! A kept engine is used for a turn only where a cold start would have been the same: the same
//! engine program (the same file), arguments, environment, system prompt and folder ([`key`]),
//! and a transcript exactly as cca left it after the engine's last turn ([`Fingerprint`]).
//! Anything else (a turn from another terminal, `cca clear`, `cca compact`, a fork, an edit by
//! hand, another model) ends it, and the turn starts cold from the transcript. A turn that did
//! not answer ends it too. An engine idle for longer than its `keep_warm` is ended, and all are
//! ended when the [`Warm`] is dropped. Spawning is `run`'s ([`run::kept`]); this module only
//! decides which kept engine may serve which turn.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::thread;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::run::kept::Kept;
use crate::store::Store;

/// How often idle engines are looked for.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// The kept engines of one front end, by session id. Dropping it ends them all.
pub(crate) struct Warm {
    slots: Arc<Mutex<HashMap<String, Slot>>>,
}

/// One kept engine, with what it was started for.
pub(crate) struct Slot {
    kept: Kept,
    key: String,
    /// The transcript as cca left it after the engine's last turn.
    transcript: Option<Fingerprint>,
    idle: Duration,
    since: Instant,
    /// Files the engine was started with (its system prompt file), kept as long as it runs.
    _files: Option<crate::store::EngineFiles>,
}

impl Slot {
    /// A newly started engine, kept for `idle` between turns.
    pub(crate) fn new(
        kept: Kept,
        key: String,
        idle: Duration,
        files: Option<crate::store::EngineFiles>,
    ) -> Slot {
        Slot { kept, key, transcript: None, idle, since: Instant::now(), _files: files }
    }

    /// Whether it was started for what a cold start now would be, and still runs.
    pub(crate) fn fits(&mut self, key: &str) -> bool {
        self.key == key && self.kept.running()
    }

    pub(crate) fn kept(&mut self) -> &mut Kept {
        &mut self.kept
    }
}

/// A transcript's state: its length and the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    len: u64,
    sha256: Vec<u8>,
}

/// The session's transcript as it is now; `None` when it cannot be read (then nothing fits it).
pub(crate) fn fingerprint(store: &Store, id: &str) -> Option<Fingerprint> {
    let mut file = store.open_session(id).ok()?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut len = 0u64;
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
                len += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return None,
        }
    }
    Some(Fingerprint { len, sha256: hasher.finalize().to_vec() })
}

/// What a cold start of the engine depends on, besides the transcript: the program's file (a
/// reinstalled engine is another one), its arguments and environment, the system prompt, the
/// folder it runs in, the environment it inherits, and the files it `reads` as it starts (each
/// by its identity and time, or its absence).
pub(crate) fn key(
    program: &Path,
    start: &dyn std::fmt::Debug,
    system: &str,
    reads: &[std::path::PathBuf],
) -> String {
    let file = crate::run::standby::file_id(program);
    let cwd = std::env::current_dir().ok();
    // All of it (an engine reads what it likes: a key, a base URL, a config folder), but what a
    // shell changes from one command to the next and no engine acts on: bash counts `SHLVL` up
    // in `$(...)` and `( ... )`, so a standby left by a script would never serve a typed `,`;
    // `PWD` is the folder, keyed already.
    let mut inherited: Vec<_> = std::env::vars_os()
        .filter(|(name, _)| !matches!(name.to_str(), Some("_" | "OLDPWD" | "SHLVL" | "PWD")))
        .collect();
    inherited.sort();
    let files: Vec<_> = reads.iter().map(|p| (p, crate::run::standby::file_id(p))).collect();
    let text =
        format!("{program:?}\0{file:?}\0{start:?}\0{system}\0{cwd:?}\0{inherited:?}\0{files:?}");
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

impl Warm {
    /// No engine kept yet; idle ones are ended from now on.
    pub(crate) fn new() -> Warm {
        let slots = Arc::new(Mutex::new(HashMap::new()));
        let watched: Weak<Mutex<HashMap<String, Slot>>> = Arc::downgrade(&slots);
        // Ends with the Warm: the thread holds it only while it looks.
        thread::Builder::new()
            .name("idle engines".into())
            .spawn(move || {
                loop {
                    thread::sleep(IDLE_CHECK);
                    let Some(slots) = watched.upgrade() else { return };
                    let idle: Vec<Slot> = {
                        let mut slots = slots.lock().unwrap_or_else(|e| e.into_inner());
                        let ids: Vec<String> = slots
                            .iter()
                            .filter(|(_, s)| s.since.elapsed() >= s.idle)
                            .map(|(id, _)| id.clone())
                            .collect();
                        ids.iter().filter_map(|id| slots.remove(id)).collect()
                    };
                    // Dropped outside the lock: each ends its engine.
                    drop(idle);
                }
            })
            .ok();
        Warm { slots }
    }

    /// The session's kept engine, taken out for a turn, if the transcript is exactly as cca
    /// left it after the engine's last turn. A kept engine that does not fit is ended.
    pub(crate) fn take(&self, store: &Store, id: &str) -> Option<Slot> {
        let slot = self.lock().remove(id)?;
        let now = fingerprint(store, id);
        (now.is_some() && slot.transcript == now).then_some(slot)
    }

    /// Keeps the engine after a turn that it answered, with the transcript as cca left it.
    pub(crate) fn keep(&self, store: &Store, id: &str, mut slot: Slot) {
        if slot.kept.ended() {
            return;
        }
        slot.transcript = fingerprint(store, id);
        slot.since = Instant::now();
        let old = self.lock().insert(id.to_string(), slot);
        drop(old);
    }

    /// Ends the session's kept engine, if there is one (the session was closed).
    pub(crate) fn end(&self, id: &str) {
        let old = self.lock().remove(id);
        drop(old);
    }

    /// Ends every kept engine (the front end is done).
    pub(crate) fn end_all(&self) {
        let slots = std::mem::take(&mut *self.lock());
        drop(slots);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Slot>> {
        self.slots.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for Warm {
    fn default() -> Warm {
        Warm::new()
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        self.end_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_the_engine_reads_at_start_changes_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("GEMINI.md");
        let reads = [file.clone()];
        let key = || key(Path::new("/bin/true"), &"args", "system", &reads);
        let absent = key();
        std::fs::write(&file, "one").unwrap();
        let created = key();
        assert_ne!(absent, created, "a file created");
        std::fs::write(&file, "two, longer").unwrap();
        assert_ne!(created, key(), "a file edited");
        assert_eq!(key(), key(), "nothing changed");
    }

    #[test]
    fn the_key_changes_with_anything_a_cold_start_depends_on() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("claude");
        std::fs::write(&program, "#!/bin/sh\n").unwrap();
        let args = vec!["-p", "--model=sonnet"];
        let base = key(&program, &args, "be brief", &[]);
        assert_eq!(base, key(&program, &args, "be brief", &[]), "the same start, the same key");
        assert_ne!(base, key(&program, &vec!["-p", "--model=opus"], "be brief", &[]), "a model");
        assert_ne!(base, key(&program, &args, "be thorough", &[]), "a system prompt");
        // An engine upgraded in place is another program.
        std::fs::write(&program, "#!/bin/sh\n# 2.1.330\n").unwrap();
        assert_ne!(base, key(&program, &args, "be brief", &[]), "another file");
    }
}
