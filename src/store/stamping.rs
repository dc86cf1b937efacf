//! Stamping the session files: a stat of each, folded into one number that any change to the
//! file changes, for the caches that must notice every change (recall's index, `cca sync`).
//!
//! At 10,000 sessions the stats are most of what a ranked search costs (the kernel's name
//! lookups, about 1.4 µs each on the benchmark's machine), so they are shared out in parts:
//! among threads started for them (up to three), and the caller's own, once it is done with
//! what it does meanwhile: no core idles while stats are left, whichever finishes first.

#[cfg(target_os = "linux")]
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use anyhow::{Result, anyhow};
use rustix::fd::OwnedFd;
use rustix::fs::Mode;

use super::PREFIX;
use super::Store;
use super::ids::{file_name, id_of};

/// What identifies a session file's contents without reading them: its size, modification
/// and change times and inode, folded into one number (FNV-1a) that any append, hand edit or
/// rename over the file changes.
pub(crate) type Stamp = u64;

/// Session files one thread stats at a time: small enough that the threads finish together,
/// large enough that taking a part costs nothing beside its stats (about 0.4 ms).
const PART: usize = 256;

/// A session file's [`Stamp`], and whether a watch on the sessions folder hears of every
/// change to it: not of a link's (the file it points at changes elsewhere), nor of a file with
/// a second name in another folder (a write through that name is told to that folder).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    pub stamp: Stamp,
    pub watched: bool,
}

/// Every session listed, in the folder's order, with its file's [`Seen`] (`None`: gone since
/// it was listed), and the [`digest`] of their stamps, taken part by part as they were stat'ed.
pub(crate) struct Stamped {
    /// Each session's file name as listed, or its id ([`Stamped::of`]).
    names: Vec<String>,
    /// Whether `names` are file names: they are made ids only when the ids are asked for, since
    /// the usual search needs no more than the digest and a few sessions' stamps.
    files: bool,
    seen: Vec<Option<Seen>>,
    digest: u64,
}

impl Stamped {
    /// Of stamps taken elsewhere (a watch's).
    pub(crate) fn of(stamps: Vec<(String, Stamp)>) -> Stamped {
        let digest = digest(stamps.iter().map(|(id, stamp)| (id.as_str(), *stamp)));
        let (names, stamps): (Vec<String>, Vec<Stamp>) = stamps.into_iter().unzip();
        let seen = stamps.into_iter().map(|stamp| Some(Seen { stamp, watched: true })).collect();
        Stamped { names, files: false, seen, digest }
    }

    /// The [`digest`] of every session's stamp.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// Session `id`'s stamp, `None` when there is no such session.
    pub(crate) fn get(&self, id: &str) -> Option<Stamp> {
        let name = match self.files {
            true => file_name(id),
            false => id.to_string(),
        };
        let at = self.names.iter().position(|held| *held == name)?;
        self.seen[at].map(|seen| seen.stamp)
    }

    /// Each session with its stamp.
    pub(crate) fn into_stamps(self) -> Vec<(String, Stamp)> {
        self.into_seen().into_iter().map(|(id, seen)| (id, seen.stamp)).collect()
    }

    /// Each session with its [`Seen`].
    pub(super) fn into_seen(self) -> Vec<(String, Seen)> {
        let files = self.files;
        let pairs = self.names.into_iter().zip(self.seen);
        pairs
            .filter_map(|(mut name, seen)| {
                let seen = seen?;
                // The file's name made its id where it stands, rather than copied.
                if files {
                    let end = PREFIX.len() + id_of(&name)?.len();
                    name.truncate(end);
                    name.drain(..PREFIX.len());
                }
                Some((name, seen))
            })
            .collect()
    }
}

/// Stamps folded into one number that any stamp's change changes, whatever their order: the
/// sum of each session's FNV-1a of its id and stamp, so that it can be taken in parts, and
/// one session's change taken out and put in ([`Stamped`], and recall's stamps file).
pub(crate) fn digest<'a>(pairs: impl Iterator<Item = (&'a str, Stamp)>) -> u64 {
    pairs.fold(0u64, |sum, (id, stamp)| {
        sum.wrapping_add(super::fnv1a(&[id.as_bytes(), &[0], &stamp.to_le_bytes()]))
    })
}

/// The sessions folder, open, with its session files' names; `None` when there is none.
type Listed = Option<(OwnedFd, Vec<String>)>;

impl Store {
    /// Every session with its file's [`Stamp`], for caches that must notice any change: an
    /// append, a hand edit, a rename over it. A session gone since it was listed is left out.
    pub(crate) fn session_stamps(&self) -> Result<Vec<(String, Stamp)>> {
        Ok(self.session_stamps_beside(|| ()).0?.into_stamps())
    }

    /// [`Store::session_stamps`], taken while this thread does `meanwhile`, which then helps
    /// with the stats still to do. Meanwhile this thread is kept on its core (see `Pinned`),
    /// and so would be any thread it starts: work that starts threads runs [`on_any_core`].
    pub(crate) fn session_stamps_beside<T>(
        &self,
        meanwhile: impl FnOnce() -> T,
    ) -> (Result<Stamped>, T) {
        let stamping = Stamping {
            store: self,
            listed: OnceLock::new(),
            next: AtomicUsize::new(0),
            parts: Mutex::new(Vec::new()),
        };
        // One thread of its own at least, so that stamping starts at once; no more than four:
        // the kernel's lookups in one folder stop scaling there.
        let helpers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(2, 4) - 1;
        // Each on a core of its own (see `Pinned`).
        let spawner = current_cpu();
        let started = AtomicUsize::new(0);
        let (whole, done) = std::thread::scope(|scope| {
            // A helper that cannot be started (a limit on threads) is done without: this
            // thread takes every part the others do not.
            let threads: Vec<_> = (0..helpers)
                .filter_map(|_| {
                    let helper = || {
                        let _elsewhere = Pinned::off(spawner);
                        started.fetch_add(1, Ordering::Relaxed);
                        stamping.help()
                    };
                    std::thread::Builder::new().spawn_scoped(scope, helper).ok()
                })
                .collect();
            let _here = Pinned::on(spawner);
            // A helper not started yet may be waiting behind this thread on its core: it is
            // let run, and moves.
            if started.load(Ordering::Relaxed) < threads.len() {
                std::thread::yield_now();
            }
            let done = meanwhile();
            stamping.help();
            // Each joined, whether or not one before it panicked.
            let joined: Vec<bool> = threads.into_iter().map(|t| t.join().is_ok()).collect();
            (joined.into_iter().all(|ok| ok), done)
        });
        let stamped = match whole {
            true => stamping.stamped(),
            false => Err(anyhow!("cannot stat the sessions")),
        };
        (stamped, done)
    }

    /// [`Store::session_stamps`], with whether a watch on the sessions folder is told of each
    /// file's changes.
    pub(super) fn session_stamps_seen(&self) -> Result<Vec<(String, Seen)>> {
        Ok(self.session_stamps_beside(|| ()).0?.into_seen())
    }

    /// One session file's [`Stamp`], `None` when it is not there.
    pub(crate) fn session_stamp(&self, id: &str) -> Option<Stamp> {
        self.session_seen(id).map(|seen| seen.stamp)
    }

    /// [`Store::session_stamp`], with whether a watch on the sessions folder is told of the
    /// file's changes.
    pub(super) fn session_seen(&self, id: &str) -> Option<Seen> {
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
        let dir = rustix::fs::open(
            self.sessions_dir(),
            flags | rustix::fs::OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
        stamp(&dir, &file_name(id))
    }
}

/// A part stamped: where it starts among the names, what each file was, and their digest.
type Part = (usize, Vec<Option<Seen>>, u64);

/// The stats of one listing of the sessions folder, taken in parts by whichever threads help.
struct Stamping<'a> {
    store: &'a Store,
    /// The folder, open, and its session files' names; listed by the first thread to help
    /// while the others wait.
    listed: OnceLock<Result<Listed>>,
    /// The first name no thread has taken yet.
    next: AtomicUsize,
    parts: Mutex<Vec<Part>>,
}

impl Stamping<'_> {
    /// Stamps parts until none is left.
    fn help(&self) {
        let Ok(Some((dir, names))) = self.listed.get_or_init(|| self.store.session_file_names())
        else {
            return;
        };
        loop {
            let start = self.next.fetch_add(PART, Ordering::Relaxed);
            if start >= names.len() {
                return;
            }
            let mut digested = 0u64;
            let seen = names[start..(start + PART).min(names.len())]
                .iter()
                .map(|name| {
                    let id = id_of(name)?;
                    let seen = stamp(dir, name)?;
                    digested = digested.wrapping_add(digest([(id, seen.stamp)].into_iter()));
                    Some(seen)
                })
                .collect();
            let mut parts = self.parts.lock().unwrap_or_else(PoisonError::into_inner);
            parts.push((start, seen, digested));
        }
    }

    /// Every part, in the folder's order, once every helper is done.
    fn stamped(self) -> Result<Stamped> {
        let Some((_, names)) = self.listed.into_inner().transpose()?.flatten() else {
            return Ok(Stamped { names: Vec::new(), files: true, seen: Vec::new(), digest: 0 });
        };
        let mut parts = self.parts.into_inner().unwrap_or_else(PoisonError::into_inner);
        parts.sort_unstable_by_key(|(start, ..)| *start);
        let mut seen = Vec::with_capacity(names.len());
        let mut digest = 0u64;
        for (_, part, digested) in parts {
            seen.extend(part);
            digest = digest.wrapping_add(digested);
        }
        Ok(Stamped { names, files: true, seen, digest })
    }
}

/// The core the calling thread runs on, where the system says.
fn current_cpu() -> Option<usize> {
    #[cfg(target_os = "linux")]
    return Some(rustix::thread::sched_getcpu());
    #[cfg(not(target_os = "linux"))]
    None
}

#[cfg(target_os = "linux")]
thread_local! {
    /// The cores the calling thread may run on when [`Pinned::on`] does not keep it on one.
    static UNPINNED: Cell<Option<rustix::thread::CpuSet>> = const { Cell::new(None) };
}

/// Runs `f` with the calling thread free of the core [`Store::session_stamps_beside`] keeps it
/// on while it does what it does meanwhile, for work that starts threads of its own (they
/// would be kept on that core too): a commit's readers and tantivy's writers.
pub(crate) fn on_any_core<T>(f: impl FnOnce() -> T) -> T {
    #[cfg(target_os = "linux")]
    if let Some(anywhere) = UNPINNED.with(Cell::get)
        && let Ok(pinned) = rustix::thread::sched_getaffinity(None)
        && rustix::thread::sched_setaffinity(None, &anywhere).is_ok()
    {
        let done = f();
        let _ = rustix::thread::sched_setaffinity(None, &pinned);
        return done;
    }
    f()
}

/// The calling thread kept on one core, or off it, while stamping; let run anywhere again when
/// dropped. Left to itself the scheduler often started a helper on its spawner's core, or later
/// moved one onto the other's, and left the two sharing it for a tick or more (4 ms here) while
/// the other core idled: a search took 25 to 37 ms instead of 20 a third of the time. Over
/// 10,000 sessions, kept apart, the searches took 19.5 to 19.9 ms at the median with nothing new
/// (20.7 to 21.3 without) and 22.7 to 23.0 right after a turn (23.8 to 23.9). Nothing is done
/// where the thread may run on one core only, or the system does not say.
struct Pinned {
    #[cfg(target_os = "linux")]
    anywhere: Option<rustix::thread::CpuSet>,
}

impl Pinned {
    /// Keeps the calling thread on core `cpu`.
    fn on(cpu: Option<usize>) -> Pinned {
        Pinned::keep(cpu, true)
    }

    /// Keeps the calling thread off core `cpu`.
    fn off(cpu: Option<usize>) -> Pinned {
        Pinned::keep(cpu, false)
    }

    #[cfg(target_os = "linux")]
    fn keep(cpu: Option<usize>, on: bool) -> Pinned {
        use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};
        let Some((cpu, anywhere)) = cpu.zip(sched_getaffinity(None).ok()) else {
            return Pinned { anywhere: None };
        };
        let mut only = match on {
            true => CpuSet::new(),
            false => anywhere,
        };
        match on {
            true => only.set(cpu),
            false => only.unset(cpu),
        }
        let pinned = anywhere.count() > 1
            && anywhere.is_set(cpu)
            && only.count() > 0
            && sched_setaffinity(None, &only).is_ok();
        if pinned && on {
            UNPINNED.with(|unpinned| unpinned.set(Some(anywhere)));
        }
        Pinned { anywhere: pinned.then_some(anywhere) }
    }

    #[cfg(not(target_os = "linux"))]
    fn keep(_cpu: Option<usize>, _on: bool) -> Pinned {
        Pinned {}
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(anywhere) = &self.anywhere {
            UNPINNED.with(|unpinned| unpinned.set(None));
            let _ = rustix::thread::sched_setaffinity(None, anywhere);
        }
    }
}

/// The stamp of the session file `name` in `dir`, `None` when it is gone; a link is followed
/// (a session file may be one), so a change to the file it points at changes the stamp.
fn stamp(dir: &OwnedFd, name: &str) -> Option<Seen> {
    use rustix::fs::{AtFlags, FileType, statat};
    let own = statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
    let link = FileType::from_raw_mode(own.st_mode) == FileType::Symlink;
    // A link that leads nowhere is a session all the same, whose reading fails and is said:
    // stamped as the link itself.
    let m = if link { statat(dir, name, AtFlags::empty()).unwrap_or(own) } else { own };
    let fields = [
        m.st_size as u64,
        m.st_mtime as u64,
        m.st_mtime_nsec as u64,
        m.st_ctime as u64,
        m.st_ctime_nsec as u64,
        m.st_ino as u64,
    ]
    .map(u64::to_le_bytes);
    let stamp = super::fnv1a(&fields.each_ref().map(|f| f.as_slice()));
    Some(Seen { stamp, watched: !link && m.st_nlink == 1 })
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Write;

    use super::*;

    /// Enough sessions to be stamped in many parts on several threads: every one is there
    /// once, and a change to one file (an append, a rewrite in place, a rename over it)
    /// changes its stamp alone.
    #[test]
    fn every_session_is_stamped_once_and_any_change_to_a_file_changes_its_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("home"));
        store.ensure().unwrap();
        let ids: Vec<String> = (0..8 * PART + 7).map(|n| format!("s-{n}")).collect();
        for id in &ids {
            fs::write(store.session_path(id), id).unwrap();
        }
        fs::write(store.sessions_dir().join("notes.txt"), "not a session").unwrap();
        let stamps = |store: &Store| -> std::collections::BTreeMap<String, Stamp> {
            store.session_stamps().unwrap().into_iter().collect()
        };
        let before = stamps(&store);
        assert_eq!(before.len(), ids.len());
        assert_eq!(store.session_stamps().unwrap().len(), ids.len(), "each once");
        // The caller helps once it is done, whatever it did meanwhile, and may then run on any
        // core it could before.
        #[cfg(target_os = "linux")]
        let cores = rustix::thread::sched_getaffinity(None).unwrap();
        let (beside, meanwhile) = store.session_stamps_beside(|| {
            // Kept on one core meanwhile (where it may run on more), but not what it runs
            // `on_any_core`, nor a thread that starts.
            #[cfg(target_os = "linux")]
            {
                let now = || rustix::thread::sched_getaffinity(None).unwrap().count();
                assert_eq!(now(), 1);
                assert_eq!(on_any_core(now), cores.count());
                let started = on_any_core(|| std::thread::spawn(now).join().unwrap());
                assert_eq!(started, cores.count());
            }
            "done"
        });
        let beside = beside.unwrap();
        // The digest taken in parts is the digest of the whole, and each session is found.
        let whole = digest(before.iter().map(|(id, stamp)| (id.as_str(), *stamp)));
        assert_eq!(beside.digest(), whole);
        assert_eq!(beside.get("s-3"), before.get("s-3").copied());
        assert_eq!(beside.get("notes"), None);
        assert_eq!(
            (beside.into_stamps().into_iter().collect(), meanwhile),
            (before.clone(), "done")
        );
        #[cfg(target_os = "linux")]
        assert_eq!(rustix::thread::sched_getaffinity(None).unwrap(), cores);

        let changed = |store: &Store, before: &std::collections::BTreeMap<String, Stamp>| {
            let after = stamps(store);
            let ids: Vec<String> = after
                .iter()
                .filter(|(id, s)| before.get(*id) != Some(s))
                .map(|(id, _)| id.clone())
                .collect();
            (ids, after)
        };
        let mut file = fs::OpenOptions::new().append(true).open(store.session_path("s-1")).unwrap();
        file.write_all(b" more").unwrap();
        let (ids, before) = changed(&store, &before);
        assert_eq!(ids, ["s-1"]);

        // The same size, written in place: the times tell.
        std::thread::sleep(std::time::Duration::from_millis(20));
        fs::write(store.session_path("s-2"), "s-9").unwrap();
        let (ids, before) = changed(&store, &before);
        assert_eq!(ids, ["s-2"]);

        let other = store.sessions_dir().join("elsewhere");
        fs::write(&other, "s-3").unwrap();
        fs::rename(&other, store.session_path("s-3")).unwrap();
        let (ids, _) = changed(&store, &before);
        assert_eq!(ids, ["s-3"]);
    }

    /// The index's stamps file and commit hold digests an earlier cca wrote: the function
    /// stays the sum of each pair's FNV-1a of its id, a zero byte and its stamp.
    #[test]
    fn the_digest_of_stamps_is_the_one_earlier_indexes_hold() {
        let pairs = [("20261121-101500", 42), ("s-2", 7)];
        assert_eq!(digest(pairs.into_iter()), 0x1648_e5c0_41e3_2246);
        assert_eq!(digest(pairs.into_iter().rev()), 0x1648_e5c0_41e3_2246, "whatever the order");
        assert_eq!(digest(std::iter::empty()), 0);
    }

    #[test]
    fn a_store_without_a_sessions_folder_has_no_stamps() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("home"));
        assert_eq!(store.session_stamps().unwrap(), []);
        assert!(!store.sessions_dir().exists(), "stamping makes no folder");
    }
}
