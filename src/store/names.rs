//! The session files' names, kept beside the sessions folder (`recall/sessions.names`) with the
//! folder's state when they were read: while the folder's device, inode and change and
//! modification times stay the same, no file was made, removed or renamed in it, and its names
//! are taken from here instead of read again. At 10,000 sessions reading the folder took 4 to
//! 5 ms of a ranked search; this file, well under one.
//!
//! A folder's times come from the kernel's coarse clock, so a change in the same tick as the
//! one before can leave them as they were: a state is kept only when the folder's times are
//! older than that clock read before them (a later change then gets a later time), and only
//! on a local file system that keeps times to the nanosecond (one that keeps whole seconds, as
//! ext4 with small inodes, FAT or a FUSE mount may, would give a change in the same second the
//! same time): with times of no nanoseconds, or on any other file system, the folder is read
//! each time. Kept only where `recall/` is: its searches are what needs the names fast, and a
//! listing makes no folder. A file that is not a regular one, is larger than any listing, or
//! does not hold the count and digest of its names it says, is not used.

use std::fmt::Write as _;

use rustix::fd::OwnedFd;

use super::Store;

/// Where the names are kept, under the recall folder.
const FILE: &str = "sessions.names";

/// The sessions folder as it was when its names were read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Folder {
    header: String,
    /// Whether a change after this state is sure to change it.
    settled: bool,
}

/// Listings larger than this are not kept (some 3 million sessions).
const MOST: u64 = 100 << 20;

/// The state of the sessions folder open as `dir`, `None` if it cannot be had, or if a change
/// could leave it as it is (see the top of this file).
pub(super) fn folder(dir: &OwnedFd) -> Option<Folder> {
    let clock = rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse);
    let stat = rustix::fs::fstat(dir).ok()?;
    let mtime = (stat.st_mtime as i64, stat.st_mtime_nsec as i64);
    let ctime = (stat.st_ctime as i64, stat.st_ctime_nsec as i64);
    if mtime.1 == 0 || ctime.1 == 0 || !super::files::local_file_system(dir) {
        return None;
    }
    let before = (clock.tv_sec, clock.tv_nsec as i64);
    Some(Folder {
        header: format!(
            "{} {} {} {} {} {}",
            stat.st_dev, stat.st_ino, mtime.0, mtime.1, ctime.0, ctime.1
        ),
        settled: settled(mtime.max(ctime), before),
    })
}

/// Whether a folder last changed at `changed` (seconds, nanoseconds) shows any later change,
/// seen when the kernel's coarse clock read `before`: only if it changed before that reading.
fn settled(changed: (i64, i64), before: (i64, i64)) -> bool {
    changed < before
}

/// The names kept for `folder`, if they were kept for it.
pub(super) fn kept(store: &Store, folder: &Folder) -> Option<Vec<String>> {
    let bytes = super::files::read_at_most(&store.recall_dir().join(FILE), MOST).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (header, rest) = text.split_once('\n')?;
    let (state, check) = header.rsplit_once(' ')?;
    let (state, count) = state.rsplit_once(' ')?;
    if state != folder.header || check != format!("{:016x}", digest(rest.as_bytes())) {
        return None;
    }
    let names: Vec<String> = rest.lines().map(str::to_string).collect();
    (count.parse() == Ok(names.len())).then_some(names)
}

/// Keeps `names`, read from the sessions folder in state `folder`, for the next listing to take.
pub(super) fn keep(store: &Store, folder: &Folder, names: &[String]) {
    let dir = store.recall_dir();
    if !folder.settled || !dir.is_dir() {
        return;
    }
    // One buffer: the header, its digest's place held by zeros, then the names.
    let mut text = String::with_capacity(128 + names.iter().map(|n| n.len() + 1).sum::<usize>());
    let _ = write!(text, "{} {} ", folder.header, names.len());
    let at = text.len();
    text.push_str("0000000000000000\n");
    for name in names {
        text.push_str(name);
        text.push('\n');
    }
    if text.len() as u64 > MOST {
        return;
    }
    let sum = format!("{:016x}", digest(&text.as_bytes()[at + 17..]));
    text.replace_range(at..at + 16, &sum);
    // A cache: a failure to write it leaves the next listing to read the folder.
    let _ = super::replace_cache_file(&dir.join(FILE), text.as_bytes());
}

/// A digest of the names' lines, eight bytes at a step: FNV-1a, a byte at a step, took 0.4 ms
/// of a search at 10,000 sessions. Any change to a byte changes every step after it (each is
/// a multiplication by an odd number, which loses nothing, and a rotation).
fn digest(text: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let step = |hash: u64, word: u64| (hash ^ word).wrapping_mul(PRIME).rotate_left(29);
    let mut words = text.chunks_exact(8);
    let mut hash = step(0xcbf2_9ce4_8422_2325, text.len() as u64);
    for word in &mut words {
        hash = step(hash, u64::from_le_bytes(word.try_into().unwrap_or([0; 8])));
    }
    words.remainder().iter().fold(hash, |hash, &byte| step(hash, u64::from(byte)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_settled_only_when_it_changed_before_the_clock_was_read() {
        assert!(settled((10, 5), (10, 6)));
        assert!(settled((9, 999_999_999), (10, 0)));
        assert!(!settled((10, 6), (10, 6)), "the same tick: another change may keep its times");
        assert!(!settled((10, 7), (10, 6)), "a fine-grained time past the coarse clock");
    }

    #[test]
    fn names_are_kept_for_the_folder_as_it_was_and_for_nothing_else() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::new(home.path().to_path_buf());
        std::fs::create_dir_all(store.sessions_dir()).unwrap();
        let open = || {
            let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
            rustix::fs::open(store.sessions_dir(), flags, 0.into()).unwrap()
        };
        let names = vec!["session_a.md".to_string(), "session_b.md".to_string()];
        let settled = |f: Folder| Folder { settled: true, ..f };
        let now = settled(folder(&open()).unwrap());
        keep(&store, &now, &names);
        assert_eq!(kept(&store, &now), None, "no recall folder: nothing kept, none made");
        assert!(!store.recall_dir().exists());

        std::fs::create_dir(store.recall_dir()).unwrap();
        keep(&store, &Folder { settled: false, ..now.clone() }, &names);
        assert_eq!(kept(&store, &now), None, "a folder changed in the clock's tick: not kept");
        keep(&store, &now, &names);
        assert_eq!(kept(&store, &now), Some(names.clone()));

        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(store.sessions_dir().join("x"), "").unwrap();
        let after = folder(&open()).unwrap();
        assert_ne!(after, now, "a file made in the folder changes its state");
        assert_eq!(kept(&store, &after), None);

        let file = store.recall_dir().join(FILE);
        let text = std::fs::read_to_string(&file).unwrap();
        for damaged in [
            text.replace("session_b.md\n", ""),
            text.replace("session_b", "session_c"),
            text[..text.len() - 3].to_string(),
            String::new(),
        ] {
            std::fs::write(&file, &damaged).unwrap();
            assert_eq!(kept(&store, &now), None, "{damaged:?}");
        }
        // Not a regular file: neither waited on nor read without end.
        std::fs::remove_file(&file).unwrap();
        rustix::fs::mknodat(rustix::fs::CWD, &file, rustix::fs::FileType::Fifo, 0o600.into(), 0)
            .unwrap();
        assert_eq!(kept(&store, &now), None, "a FIFO");
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &file).unwrap();
        assert_eq!(kept(&store, &now), None, "a device");
    }

    #[test]
    fn a_folder_timed_to_the_second_is_read_each_time() {
        let home = tempfile::tempdir().unwrap();
        let sessions = home.path().join("sessions");
        std::fs::create_dir(&sessions).unwrap();
        let open = || {
            let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
            rustix::fs::open(&sessions, flags, 0.into()).unwrap()
        };
        assert!(folder(&open()).is_some(), "this machine's temporary folder keeps nanoseconds");
        let second = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_796_000_000);
        std::fs::File::open(&sessions).unwrap().set_modified(second).unwrap();
        assert_eq!(folder(&open()), None, "a time of no nanoseconds may hide a change");
    }
}
