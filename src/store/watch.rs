//! A watch on the sessions folder, for a server that lives on between searches (`cca mcp`):
//! the kernel (inotify) tells it which session files changed, so a search stats those again,
//! not every session. At 10,000 sessions the stat of each is most of what a search costs.
//!
//! What the kernel might not tell is stat'ed as before: a link's file and one with a second
//! name (see [`Seen`]) at every search; every session when the kernel's queue overflowed or
//! the folder went, and once a minute besides (a file given a second name elsewhere since, and
//! written through it, is not told, nor a write through a memory map); and at every search on a file system whose changes may
//! come from another machine (NFS, FUSE), as a command's search does.

use std::collections::{BTreeMap, BTreeSet};
use std::mem::MaybeUninit;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Result;
use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use super::Store;
use super::ids::id_from_file_name;
use super::stamping::{Seen, Stamp};

/// How long what the kernel told is trusted before every session is stat'ed again.
const REFRESH: Duration = Duration::from_secs(60);

/// The sessions as last stamped, kept current by what the kernel tells.
#[derive(Default)]
pub(crate) struct SessionsWatch {
    state: Mutex<Option<Watched>>,
}

struct Watched {
    inotify: OwnedFd,
    /// The folder watched (device and inode): the store's path may come to name another (a
    /// `CCA_HOME` moved away and made again), of which this watch hears nothing.
    folder: (u64, u64),
    since: Instant,
    stamps: BTreeMap<String, Stamp>,
    /// Sessions stat'ed at every search: the watch may not hear of their changes.
    unwatched: BTreeSet<String>,
}

impl SessionsWatch {
    /// Every session with its file's stamp, as [`Store::session_stamps`] gives them.
    pub(crate) fn stamps(&self, store: &Store) -> Result<Vec<(String, Stamp)>> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(watched) = state.as_mut().filter(|w| w.since.elapsed() < REFRESH)
            && folder(store) == Some(watched.folder)
            && let Some(changed) = watched.changed()
        {
            for id in changed {
                watched.forget(&id);
                if let Some(seen) = store.session_seen(&id) {
                    watched.keep(id, seen);
                }
            }
            return Ok(watched.stamps.iter().map(|(id, s)| (id.clone(), *s)).collect());
        }
        *state = None;
        // Watched first, then stamped: a change made meanwhile is stat'ed again next time.
        let inotify = watch(store).zip(folder(store));
        let seen = store.session_stamps_seen()?;
        let stamps = seen.iter().map(|(id, seen)| (id.clone(), seen.stamp)).collect();
        if let Some((inotify, folder)) = inotify {
            let mut watched = Watched {
                inotify,
                folder,
                since: Instant::now(),
                stamps: BTreeMap::new(),
                unwatched: BTreeSet::new(),
            };
            seen.into_iter().for_each(|(id, seen)| watched.keep(id, seen));
            *state = Some(watched);
        }
        Ok(stamps)
    }
}

impl Watched {
    fn keep(&mut self, id: String, seen: Seen) {
        if !seen.watched {
            self.unwatched.insert(id.clone());
        }
        self.stamps.insert(id, seen.stamp);
    }

    fn forget(&mut self, id: &str) {
        self.stamps.remove(id);
        self.unwatched.remove(id);
    }

    /// The sessions to stat again: those the kernel named since the last call, and those it
    /// may not name. `None` when what it told cannot be trusted to be all (its queue
    /// overflowed, the folder was removed or moved): then every session is stat'ed again.
    fn changed(&mut self) -> Option<BTreeSet<String>> {
        let lost = ReadFlags::QUEUE_OVERFLOW
            | ReadFlags::IGNORED
            | ReadFlags::DELETE_SELF
            | ReadFlags::MOVE_SELF
            | ReadFlags::UNMOUNT;
        let mut changed = self.unwatched.clone();
        let mut buffer = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut events = inotify::Reader::new(&self.inotify, &mut buffer);
        loop {
            match events.next() {
                Ok(event) if event.events().intersects(lost) => return None,
                Ok(event) => {
                    let name = event.file_name().and_then(|name| name.to_str().ok());
                    changed.extend(name.and_then(id_from_file_name));
                }
                Err(rustix::io::Errno::AGAIN) => return Some(changed),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return None,
            }
        }
    }
}

/// The device and inode of the folder `store`'s sessions are in, a link to it followed as
/// the watch follows it.
fn folder(store: &Store) -> Option<(u64, u64)> {
    let stat = rustix::fs::stat(store.sessions_dir()).ok()?;
    Some((stat.st_dev, stat.st_ino as u64))
}

/// A watch on `store`'s sessions folder, if it has one on a local file system.
fn watch(store: &Store) -> Option<OwnedFd> {
    let dir = store.sessions_dir();
    let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
    let opened = rustix::fs::open(&dir, flags | rustix::fs::OFlags::CLOEXEC, 0.into()).ok()?;
    if !super::files::local_file_system(&opened) {
        return None;
    }
    let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
    let events = WatchFlags::MODIFY
        | WatchFlags::ATTRIB
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR;
    inotify::add_watch(&inotify, &dir, events).ok()?;
    Some(inotify)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(mut stamps: Vec<(String, Stamp)>) -> Vec<(String, Stamp)> {
        stamps.sort();
        stamps
    }

    #[test]
    fn a_watch_gives_what_a_stat_of_every_session_gives_after_each_kind_of_change() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path().to_path_buf());
        let sessions = store.sessions_dir();
        std::fs::create_dir_all(&sessions).unwrap();
        let path = |id: &str| store.session_path(id);
        for id in ["a", "b", "c", "g"] {
            std::fs::write(path(id), format!("# {id}\n")).unwrap();
        }
        std::fs::write(home.path().join("elsewhere.md"), "# d\n").unwrap();
        std::os::unix::fs::symlink(home.path().join("elsewhere.md"), path("d")).unwrap();
        std::fs::hard_link(path("g"), home.path().join("second-name.md")).unwrap();
        let watch = SessionsWatch::default();
        let same = |why: &str| {
            assert_eq!(
                sorted(watch.stamps(&store).unwrap()),
                sorted(store.session_stamps().unwrap()),
                "{why}"
            );
        };
        same("the first, a stat of each");
        assert!(watch.state.lock().unwrap().is_some(), "watched on a local file system");
        let append = |p: std::path::PathBuf, text: &str| {
            use std::io::Write;
            std::fs::OpenOptions::new().append(true).open(p).unwrap().write_all(text.as_bytes())
        };
        append(path("a"), "more\n").unwrap();
        same("an append in place");
        std::fs::write(path("b"), "# b, rewritten\n").unwrap();
        same("a rewrite in place");
        std::fs::write(sessions.join(".tmp"), "# c, saved aside\n").unwrap();
        std::fs::rename(sessions.join(".tmp"), path("c")).unwrap();
        same("a save by rename");
        append(home.path().join("elsewhere.md"), "more\n").unwrap();
        same("a change to a link's file, which the folder's watch does not hear of");
        append(home.path().join("second-name.md"), "through the second name\n").unwrap();
        same("a write through a second name elsewhere");
        std::fs::write(path("e"), "# e\n").unwrap();
        std::fs::remove_file(path("b")).unwrap();
        same("one new, one gone");
        // More than the kernel queues: it says so, and every session is stat'ed again.
        let queued: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
            .map_or(16_384, |n| n.trim().parse().unwrap());
        for n in 0..=queued {
            std::fs::File::create(sessions.join(format!("not-a-session-{n}"))).unwrap();
        }
        std::fs::write(path("a"), "# a, after the flood\n").unwrap();
        same("the kernel's queue overflowed");
        std::fs::rename(&sessions, home.path().join("moved")).unwrap();
        std::fs::create_dir(&sessions).unwrap();
        std::fs::write(path("f"), "# f\n").unwrap();
        same("the folder moved away and made again");
        let store_path = home.path().join("cca");
        std::fs::create_dir_all(store_path.join("sessions")).unwrap();
        std::fs::write(store_path.join("sessions/session_h.md"), "# h\n").unwrap();
        let linked = Store::new(home.path().join("linked"));
        std::os::unix::fs::symlink(&store_path, &linked.home).unwrap();
        let watch = SessionsWatch::default();
        assert_eq!(watch.stamps(&linked).unwrap(), linked.session_stamps().unwrap());
        std::fs::rename(&store_path, home.path().join("cca-before")).unwrap();
        std::fs::create_dir_all(store_path.join("sessions")).unwrap();
        std::fs::write(store_path.join("sessions/session_i.md"), "# i\n").unwrap();
        assert_eq!(
            watch.stamps(&linked).unwrap(),
            linked.session_stamps().unwrap(),
            "the store's folder moved away and made again, with the watched folder in it"
        );
    }
}
