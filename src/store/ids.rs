//! Session ids and names: making a new session file under a free id, listing the ids there
//! are, and turning what a user typed (an id, a unique prefix, a name) into one.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use rustix::fs::Mode;

use crate::error::Failure;

use super::files::{set_mode, sync_dir};
use super::{FILE_MODE, PREFIX, SUFFIX, Store};

impl Store {
    pub(crate) fn session_path(&self, id: &str) -> PathBuf {
        self.sessions_dir().join(file_name(id))
    }

    /// Creates a new session file holding `contents(id)`, named after `stamp`; a second session
    /// in the same second gets `-2`, `-3`, ... An id in the trash is taken too: `restore` brings
    /// it back, and sync knows it as that session. The file appears whole or not at all.
    pub(crate) fn create_session(
        &self,
        stamp: &str,
        contents: impl Fn(&str) -> String,
    ) -> Result<String> {
        self.create_session_with(stamp, contents, true)
    }

    /// As [`Store::create_session`], without waiting for the disk: for many sessions at once
    /// (`cca import`), each still appears whole (a temp file renamed into place), and
    /// [`Store::sync_sessions`] makes them all durable at the end, with one sync instead of two
    /// per session (10,000 sessions: 17 s of fsyncs on the benchmark's disk).
    pub(crate) fn create_session_unsynced(
        &self,
        stamp: &str,
        contents: impl Fn(&str) -> String,
    ) -> Result<String> {
        self.create_session_with(stamp, contents, false)
    }

    /// Makes everything written to the sessions' file system durable (`syncfs`).
    pub(crate) fn sync_sessions(&self) -> Result<()> {
        let dir = File::open(self.sessions_dir())
            .with_context(|| format!("cannot open {}", self.sessions_dir().display()))?;
        rustix::fs::syncfs(&dir)
            .with_context(|| format!("cannot sync {}", self.sessions_dir().display()))
    }

    fn create_session_with(
        &self,
        stamp: &str,
        contents: impl Fn(&str) -> String,
        sync: bool,
    ) -> Result<String> {
        for n in 1u32.. {
            let id = if n == 1 { stamp.to_string() } else { format!("{stamp}-{n}") };
            // Taken names are skipped cheaply; the no-clobber rename settles any race.
            if !self.id_taken(&id) && self.create_file_as(&id, &contents(&id), sync)? {
                return Ok(id);
            }
        }
        unreachable!("the loop returns")
    }

    /// The id [`Store::create_session`] would give now, skipping those `reserved` says are
    /// promised elsewhere; nothing is written.
    pub(crate) fn free_id(&self, stamp: &str, reserved: impl Fn(&str) -> bool) -> String {
        (1u32..)
            .map(|n| if n == 1 { stamp.to_string() } else { format!("{stamp}-{n}") })
            .find(|id| !reserved(id) && !self.id_taken(id))
            .expect("some name is free")
    }

    /// Creates the session file `id` holding `contents`, whole or not at all; `false` when a
    /// session of that id exists already (it is left as it is).
    pub(crate) fn create_session_as(&self, id: &str, contents: &str) -> Result<bool> {
        self.create_file_as(id, contents, true)
    }

    /// [`Store::create_session_as`] without waiting for the disk, for many sessions at once
    /// (`cca sync` taking another machine's): [`Store::sync_sessions`] then makes them durable.
    pub(crate) fn create_session_as_unsynced(&self, id: &str, contents: &str) -> Result<bool> {
        self.create_file_as(id, contents, false)
    }

    /// [`Store::create_session_as`], synced to the disk or not (`sync`).
    fn create_file_as(&self, id: &str, contents: &str, sync: bool) -> Result<bool> {
        self.ensure()?;
        let dir = self.sessions_dir();
        let mut temp = super::files::temp_file(&dir, ".new-session-")?;
        temp.write_all(contents.as_bytes())
            .and_then(|()| if sync { temp.as_file().sync_data() } else { Ok(()) })
            .with_context(|| format!("cannot write a new session in {}", dir.display()))?;
        set_mode(temp.path(), FILE_MODE)?;
        match temp.persist_noclobber(self.session_path(id)) {
            Ok(_) => {
                if sync {
                    sync_dir(&dir);
                }
                Ok(true)
            }
            Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(e.error)
                .with_context(|| format!("cannot create {}", self.session_path(id).display())),
        }
    }

    /// Every session id, in no particular order.
    pub(crate) fn session_ids(&self) -> Result<Vec<String>> {
        let Some((_, names)) = self.session_file_names()? else { return Ok(Vec::new()) };
        Ok(names.iter().filter_map(|name| id_of(name)).map(str::to_string).collect())
    }

    /// The sessions folder, open, with the name of every session file in it (in no particular
    /// order); `None` when there is no folder yet. Listed with one buffer for the folder, not an
    /// allocation per entry, and not at all while the folder is as when it was last listed
    /// (`names`): at 10,000 sessions the listing is a sixth of what a search that finds nothing
    /// new costs.
    pub(super) fn session_file_names(&self) -> Result<Option<(rustix::fd::OwnedFd, Vec<String>)>> {
        let path = self.sessions_dir();
        let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
        let dir = match rustix::fs::open(&path, flags | rustix::fs::OFlags::CLOEXEC, Mode::empty())
        {
            Ok(dir) => dir,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => {
                return Err(io::Error::from(e))
                    .with_context(|| format!("cannot list {}", path.display()));
            }
        };
        // Taken before the folder is read: a change made while it is read leaves the names kept
        // stale (the folder's state is not theirs), never wrong.
        let folder = super::names::folder(&dir);
        if let Some(names) = folder.as_ref().and_then(|folder| super::names::kept(self, folder)) {
            return Ok(Some((dir, names)));
        }
        let mut names = Vec::new();
        each_name(&dir, |name| {
            if let Some(name) = name.to_str().ok().filter(|n| id_of(n).is_some()) {
                names.push(name.to_string());
            }
        })
        .with_context(|| format!("cannot list {}", path.display()))?;
        if let Some(folder) = folder {
            super::names::keep(self, &folder, &names);
        }
        Ok(Some((dir, names)))
    }

    /// A session id from an id, a unique prefix of one, or a session's name. This is the one
    /// place a user's words become a session, so names work wherever ids do.
    pub(crate) fn resolve_id(&self, wanted: &str) -> Result<String> {
        let (could_be_id, could_be_name) =
            id_or_name(wanted, "ids look like 20261121-101500; list them with `cca sessions`")?;
        // Whatever is there under the id is that session's: a FIFO, a folder or a dangling
        // link named like one is found, and then said to be what it is by whoever reads it.
        if could_be_id && fs::symlink_metadata(self.session_path(wanted)).is_ok() {
            return Ok(wanted.to_string());
        }
        if could_be_name {
            // Names live in the headers; the index has them without reading every transcript.
            let mut named: Vec<String> = self
                .listing()?
                .into_iter()
                .filter(|l| l.name.as_deref() == Some(wanted))
                .map(|l| l.id)
                .collect();
            named.sort();
            // A session `cca sync` forked from another machine's continuation keeps that
            // session's header, its name too: the name stays the session's whose id it is.
            if named.len() > 1 {
                let own: Vec<String> = named
                    .iter()
                    .filter(|id| {
                        self.summarize_unlocked(id).is_ok_and(|s| s.header.id == id.as_str())
                    })
                    .cloned()
                    .collect();
                if own.len() == 1 {
                    named = own;
                }
            }
            match named.len() {
                0 => {}
                1 => return Ok(named.remove(0)),
                n => {
                    return Err(Failure::usage(format!(
                        "{n} sessions are named `{wanted}`: {}",
                        named.join(", ")
                    ))
                    .hint(format!("give an id, or rename one: `cca name {} NEW-NAME`", named[0]))
                    .into());
                }
            }
        }
        if could_be_id && fs::symlink_metadata(self.trashed_path(wanted)).is_ok() {
            bail!(
                Failure::usage(format!("`{wanted}` is in the trash"))
                    .hint(format!("bring it back with `cca restore {wanted}`"))
            );
        }
        let mut matches: Vec<String> = match could_be_id {
            true => self.session_ids()?.into_iter().filter(|id| id.starts_with(wanted)).collect(),
            false => Vec::new(),
        };
        matches.sort();
        if is_whole_id(wanted) {
            return Err(no_session_but(wanted, &matches));
        }
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 if could_be_name => {
                // A name in the trash is no live session's, but it is not nothing either.
                let trashed = self.trash_ids().into_iter().rev().find(|id| {
                    self.trashed_header(id).is_some_and(|h| h.name.as_deref() == Some(wanted))
                });
                match trashed {
                    Some(id) => {
                        Err(Failure::usage(format!("`{wanted}` names {id}, which is in the trash"))
                            .hint(format!("bring it back with `cca restore {id}`"))
                            .into())
                    }
                    None => Err(no_session_but(wanted, &matches)),
                }
            }
            0 => Err(no_session_but(wanted, &matches)),
            n => {
                let shown: Vec<&str> = matches.iter().take(10).map(String::as_str).collect();
                let more = if n > 10 { format!(" and {} more", n - 10) } else { String::new() };
                Err(Failure::usage(format!("`{wanted}` matches {n} sessions"))
                    .hint(format!("give more of the id: {}{more}", shown.join(", ")))
                    .into())
            }
        }
    }
}

/// Calls `each` with the name of every entry of the folder open as `dir`. On Linux the
/// kernel's listing is read in place, from one buffer: rustix's `Dir` makes a string of each
/// name, 1 to 2 ms of the 5 that listing 10,000 sessions took.
fn each_name(dir: &rustix::fd::OwnedFd, mut each: impl FnMut(&std::ffi::CStr)) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let mut buffer = vec![std::mem::MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut entries = rustix::fs::RawDir::new(dir, &mut buffer);
        while let Some(entry) = entries.next() {
            each(entry?.file_name());
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        let mut entries = rustix::fs::Dir::read_from(dir)?;
        while let Some(entry) = entries.read() {
            each(entry?.file_name());
        }
        Ok(())
    }
}

/// Whether `wanted` is an id as cca makes them, whole (`20261121-101500`, or the `-2` of the
/// same second), rather than the start of one. A whole id names that session only, never
/// another it begins (the `-2` of the same second): `cca rm --purge ID` of a session in the
/// trash once deleted its live namesake of that second. (A fork sync names after a machine,
/// `-laptop`, may still be given by its start.)
pub(crate) fn is_whole_id(wanted: &str) -> bool {
    let (Some(stamp), Some(rest)) = (wanted.get(..15), wanted.get(15..)) else { return false };
    if !stamp.is_ascii() {
        return false;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (day, time) = stamp.split_at(8);
    digits(day)
        && time.strip_prefix('-').is_some_and(digits)
        && (rest.is_empty() || rest.strip_prefix('-').is_some_and(digits))
}

/// "No session `wanted`", naming the sessions whose ids it begins (`matches`) if any.
fn no_session_but(wanted: &str, matches: &[String]) -> anyhow::Error {
    let hint = match matches {
        [] => "list sessions with `cca sessions`".to_string(),
        some => {
            format!("did you mean {}?", some.iter().take(5).cloned().collect::<Vec<_>>().join(", "))
        }
    };
    Failure::usage(format!("no session `{wanted}`")).hint(hint).into()
}

/// Orders ids by time, then by their same-second counter (`-2` before `-10`).
pub(crate) fn sort_key(id: &str) -> (String, u64) {
    let (time, n) = sort_key_of(id);
    (time.to_string(), n)
}

/// [`sort_key`], borrowed from the id: for orders taken many times over (a search's ties).
pub(crate) fn sort_key_of(id: &str) -> (&str, u64) {
    let mut parts = id.splitn(3, '-');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(day), Some(time), Some(n)) if n.chars().all(|c| c.is_ascii_digit()) => {
            (&id[..day.len() + 1 + time.len()], n.parse().unwrap_or(0))
        }
        _ => (id, 1),
    }
}

pub(super) fn file_name(id: &str) -> String {
    format!("{PREFIX}{id}{SUFFIX}")
}

pub(super) fn id_from_file_name(name: &str) -> Option<String> {
    id_of(name).map(str::to_string)
}

/// The session id a file name is of, if it is a session file's.
pub(super) fn id_of(name: &str) -> Option<&str> {
    let id = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    validate_id(id).ok().map(|()| id)
}

/// Session ids are plain names: letters, digits, `-` and `_`; never a path.
pub(crate) fn validate_id(id: &str) -> Result<()> {
    if !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Ok(());
    }
    bail!(
        Failure::usage(format!("`{id}` is not a session id"))
            .hint("ids look like 20261121-101500; list them with `cca sessions`")
    )
}

/// Whether a user's word could be a session id, and whether a name; when it could be neither,
/// the error says so, with `hint`.
pub(crate) fn id_or_name(wanted: &str, hint: &str) -> Result<(bool, bool)> {
    let could_be = (validate_id(wanted).is_ok(), validate_name(wanted).is_ok());
    if could_be == (false, false) {
        bail!(Failure::usage(format!("`{wanted}` is not a session id or name")).hint(hint));
    }
    Ok(could_be)
}

/// Session names: letters, digits, `.`, `-` and `_`, with at least one letter (so a name is
/// never taken for an id, which is digits and dashes), not starting with `.` or `-`.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        && name.chars().any(|c| c.is_ascii_alphabetic())
        && !name.starts_with(['.', '-']);
    if ok {
        return Ok(());
    }
    bail!(Failure::usage(format!("`{name}` cannot be a session name")).hint(
        "a name is up to 64 letters, digits, `.`, `-` and `_`, with a letter, such as rust-locks"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_order_by_second_then_count_borrowed_or_not() {
        let mut ids = ["20261121-101500-10", "20261121-101501", "20261121-101500-2", "import-x-y"];
        ids.sort_by(|a, b| sort_key_of(a).cmp(&sort_key_of(b)));
        assert_eq!(
            ids,
            ["20261121-101500-2", "20261121-101500-10", "20261121-101501", "import-x-y"]
        );
        for id in
            ids.into_iter().chain(["20261121-101500", "a-b-", "x", "a-b-99999999999999999999"])
        {
            let (time, n) = sort_key(id);
            assert_eq!(sort_key_of(id), (time.as_str(), n), "{id}");
        }
    }

    #[test]
    fn a_whole_id_is_a_second_with_its_count_and_nothing_less() {
        for whole in ["20261121-101500", "20261121-101500-2", "20261121-101500-12"] {
            assert!(is_whole_id(whole), "{whole}");
        }
        for start in [
            "20261121-1015",
            "20261121-101500-",
            "20261121-101500-lap",
            "20261121-101500-laptop",
            "2026112a-101500",
            "20261121_101500",
            "20261121-10150é",
            "é20261121-101500",
            "",
        ] {
            assert!(!is_whole_id(start), "{start}");
        }
    }

    #[test]
    fn ids_are_never_paths() {
        for bad in ["", "..", "a/b", "/etc", "a b", "x.md", "../../x"] {
            assert!(validate_id(bad).is_err(), "{bad}");
        }
        validate_id("20261121-101500-2").unwrap();
        for name in ["rust-locks", "v1.89", "a", "notes_2026", "X"] {
            validate_name(name).unwrap();
        }
        for bad in ["", "2026", "20261121-101500", ".hidden", "-flag", "a/b", "a b", "..", "é"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        assert!(validate_name(&"a".repeat(65)).is_err());
        assert_eq!(
            id_from_file_name("session_20261121-101500.md").as_deref(),
            Some("20261121-101500")
        );
        assert_eq!(id_from_file_name("session_../x.md"), None);
        assert_eq!(id_from_file_name("latest"), None);
    }
}
