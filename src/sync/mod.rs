//! `cca sync`: every conversation on every machine, over git, sealed for the user's key.
//!
//! The remote is a git repository whose branch `cca` holds, for each session, one log per
//! machine that changed it: `sessions/BB/TOKEN/MACHINE.log`, a [`Record`] a line, each sealed
//! ([`Seal`]). A machine only ever appends to its own logs, so two machines' commits touch
//! different files and git merges them as a union, never asking anyone.
//!
//! A sync, holding the sync lock:
//! 1. **Send**: what changed here since the last sync (a turn, a hand edit, a name, a removal,
//!    a restore, a new session) becomes records appended to this machine's logs, committed.
//! 2. **Fetch and merge** the remote's branch. A remote whose history no longer holds the
//!    commit last merged was rewritten: an error, nothing here changed.
//! 3. **Receive**: the other machines' new records, every one opened and read before any is
//!    applied, are applied to the sessions here under each session's lock. A record continues
//!    the local session whose `base` is its parent; one whose parent no local session is at was
//!    a continuation made elsewhere of a session also continued here, and becomes a fork named
//!    after that machine. Nothing is lost, and the session already here stays the session.
//! 4. **Push**; if another machine pushed first, fetch, merge, receive and push again.
//!
//! The state (`$CCA_HOME/sync/state.json`) says where each local session stands and how many
//! lines of each log were taken in. It is a cache of the logs in one sense only: a sync killed
//! at any point is completed by the next one (the logs are written before the state, a log's
//! cut last line is dropped, and applying a record whose result is already there adopts it).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::error::{Failure, exit};
use crate::store::{self, Store};

mod git;
mod machine;
mod receive;
mod record;
mod seal;

pub(crate) use git::BRANCH;
use git::{Git, Pushed};
use machine::{host_name, machine_name, new_machine_id};
use record::{Change, ImageCopy, Record, change_since, hash};
pub(crate) use seal::KEY_PREFIX;
use seal::Seal;

/// The file at the top of the remote saying what it is and which key seals it.
const DESCRIPTION: &str = "cca-sync.json";
/// The folder of the remote holding the logs.
const LOGS: &str = "sessions";
/// The folder of the remote holding the images sessions link to.
const IMAGES: &str = "files";
/// Bytes of records gathered before they are written to the logs.
const WRITE_BATCH: usize = 64 << 20;
/// Records sent in one sync past which git is told they are many ([`Git::bulk`]).
const BULK: usize = 500;
/// Pushes tried before giving up when other machines keep pushing first.
const PUSHES: usize = 5;

#[derive(Debug, Serialize, Deserialize)]
struct Description {
    format: u32,
    /// The key's public half; absent on a plain remote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    recipient: Option<String>,
}

/// What this machine knows of the remote and of where each session stands against it.
#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The remote's address, as given to `cca sync init`.
    remote: String,
    /// This machine's id on the remote: random, so it says nothing of the machine.
    machine: String,
    /// This machine's name (its host name), in its records, for forks named after it.
    name: String,
    #[serde(default)]
    plain: bool,
    /// The number of this machine's next record.
    #[serde(default)]
    next: u64,
    /// The remote commit last merged.
    #[serde(default)]
    merged: Option<String>,
    /// When the last sync completed.
    #[serde(default)]
    synced_at: Option<String>,
    /// A receive began and did not finish: the next sync completes it first.
    #[serde(default)]
    receiving: bool,
    /// The clone is being made again ([`reclone_if_lost`]) and what went with the old one is
    /// not yet forgotten: until it is, the next sync makes it again from the start.
    #[serde(default)]
    recloning: bool,
    /// How many lines of each log (its path in the repository) were taken in.
    #[serde(default)]
    logs: BTreeMap<String, u64>,
    /// Each local session (by its id here) kept in sync.
    #[serde(default)]
    sessions: BTreeMap<String, Local>,
    /// The images (their names in `files/`) sent or taken.
    #[serde(default)]
    images: std::collections::BTreeSet<String>,
}

/// Where a local session stands: which record its file is, and that file's size and hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Local {
    /// The session it is on the remote (its id where it was created).
    session: String,
    /// The record its file is the result of.
    base: String,
    len: u64,
    hash: String,
    #[serde(default)]
    removed: bool,
    /// The file's stamp then: unchanged, the file is not read again.
    #[serde(default)]
    stamp: u64,
}

/// What a sync did, for the front end to say.
#[derive(Debug, Default)]
pub(crate) struct Report {
    /// Records sent.
    pub sent: usize,
    /// Records an earlier sync wrote and could not push were pushed by this one.
    pub sent_earlier: bool,
    /// Sessions that arrived, new here.
    pub new: Vec<String>,
    /// `cca sync init` made a new key (for a new remote).
    pub made_key: bool,
    /// Sessions continued (or edited) elsewhere, brought up to date here.
    pub continued: Vec<String>,
    /// Forks made here: (the fork, the session, the machine whose continuation it holds).
    pub forks: Vec<(String, String, String)>,
    /// Sessions another machine started under an id taken here by another conversation (both
    /// started in the same second): (the id it has here, the id, that machine).
    pub same_id: Vec<(String, String, String)>,
    pub removed: Vec<String>,
    pub restored: Vec<String>,
    /// Sessions left for the next sync: a turn was running in them.
    pub busy: Vec<String>,
    /// Sessions whose file could not be read, so not sent nor brought up to date: (id, why).
    pub skipped: Vec<(String, String)>,
    /// The remote had lost cca's branch (emptied, or made again): this machine's, which holds
    /// every record it merged, was pushed there again.
    pub remote_refilled: bool,
    /// Records of the remote's that cannot be read (what is wrong with each): their sessions
    /// were not brought up to date; every other was.
    pub unreadable: Vec<String>,
    /// Where `latest` points now, when the sync moved it.
    pub latest: Option<String>,
    /// The session `latest` pointed at, moved to the trash by another machine, and where it
    /// points now (`None`: no session is left).
    pub latest_removed: Option<(String, Option<String>)>,
}

impl Report {
    /// `id`'s file cannot be read (`why`): said once, however many of its changes wait.
    fn skip(&mut self, id: &str, why: &anyhow::Error) {
        if !self.skipped.iter().any(|(skipped, _)| skipped == id) {
            self.skipped.push((id.to_string(), format!("{why:#}")));
        }
    }
}

/// What `cca sync status` shows.
#[derive(Debug)]
pub(crate) struct Status {
    pub remote: String,
    pub name: String,
    pub encrypted: bool,
    pub synced_at: Option<String>,
    /// Sessions changed here since the last sync.
    pub changed: usize,
    pub sessions: usize,
    /// What an earlier sync wrote and could not push (the remote was away) waits here.
    pub unpushed: bool,
}

/// Sets this machine up to sync with `remote`: a new remote gets a new key (or none with
/// `plain`), a remote in use is joined with its key. Then syncs once.
pub(crate) fn init(
    store: &Store,
    remote: &str,
    key: Option<&str>,
    plain: bool,
    name: Option<&str>,
) -> Result<Report> {
    if let Some(name) = name {
        machine_name(name)?;
    }
    if store.read_sync_state()?.is_some() {
        let state = load(store)?;
        bail!(Failure::usage(format!("this machine syncs with {} already", state.remote)).hint(
            format!(
                "`cca sync` syncs with it; to use another remote, move {} away first",
                store.sync_dir().display()
            )
        ));
    }
    let remote = &git::remote_address(remote)?;
    let made_remote = git::make_folder_remote(remote)?;
    let remote = made_remote.as_deref().unwrap_or(remote);
    store.make_sync_dir()?;
    let repo = store.sync_repo();
    if repo.exists() {
        // Left by an init that failed: nothing of it was used.
        std::fs::remove_dir_all(&repo)
            .with_context(|| format!("cannot remove {}", repo.display()))?;
    }
    // A key an init left that stopped after its push (a kill, Ctrl-C): the remote may be
    // sealed for it, and it is nowhere else.
    let left = store.read_sync_key()?.map(|k| k.trim().to_string()).filter(|k| !k.is_empty());
    let git = Git::new(&repo, false)?;
    git.create(remote)?;
    // Said by the front end: a key it must carry to the other machines.
    let mut made_key = false;
    let made = (|| -> Result<Seal> {
        git.fetch()?;
        let seal = if git.remote_head().is_some() {
            git.start_at_remote()?;
            match (key, &left) {
                (None, Some(left)) if !plain => {
                    join(&repo, Some(left), false).or_else(|_| join(&repo, None, false))?
                }
                _ => join(&repo, key, plain)?,
            }
        } else {
            let seal = match key {
                _ if plain => Seal::Plain,
                Some(key) => Seal::from_key(key)?,
                None => {
                    made_key = true;
                    Seal::generate()
                }
            };
            let description = Description { format: 1, recipient: seal.recipient() };
            let text = serde_json::to_string_pretty(&description)? + "\n";
            store::write_repo_file(&repo.join(DESCRIPTION), &text)?;
            // Kept before the remote names it: a stop after the push must not lose it.
            if let Some(key) = seal.key_text() {
                store.write_sync_key(&key)?;
            }
            git.commit_all("cca sync: a new remote")?;
            if git.push()? != Pushed::Done {
                bail!(
                    Failure::new(exit::ERROR, "another machine set up this remote just now").hint(
                        "join it: `cca sync key` there, then `cca sync init REMOTE --key KEY` here"
                    )
                );
            }
            seal
        };
        Ok(seal)
    })();
    let seal = match made {
        Ok(seal) => seal,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&repo);
            return Err(e);
        }
    };
    if let Some(key) = seal.key_text() {
        store.write_sync_key(&key)?;
    }
    let state = State {
        remote: remote.to_string(),
        machine: new_machine_id(),
        name: name.map_or_else(host_name, str::to_string),
        plain: matches!(seal, Seal::Plain),
        ..State::default()
    };
    save(store, &state)?;
    let report = sync(store, false, || {}, &|_, _| {})?;
    Ok(Report { made_key, ..report })
}

/// The seal of a remote in use, from its description and the key given.
fn join(repo: &Path, key: Option<&str>, plain: bool) -> Result<Seal> {
    let text = std::fs::read_to_string(repo.join(DESCRIPTION)).map_err(|_| {
        Failure::new(
            exit::ERROR,
            format!("the remote's branch `{BRANCH}` is not a cca sync remote"),
        )
        .hint("give an empty repository, or one another machine set up with `cca sync init`")
    })?;
    let description: Description = serde_json::from_str(&text).map_err(|e| {
        Failure::new(exit::ERROR, format!("the remote's {DESCRIPTION} cannot be read: {e}"))
    })?;
    match (description.recipient, key) {
        (None, None) => Ok(Seal::Plain),
        (None, Some(_)) => Err(Failure::usage("this remote is plain (set up with --plain): it takes no key")
            .hint("leave out --key")
            .into()),
        (Some(_), None) if plain => Err(Failure::usage("this remote is encrypted: --plain cannot join it")
            .hint("run `cca sync key` on a machine that syncs with it, then `cca sync init REMOTE --key KEY`")
            .into()),
        (Some(_), None) => Err(Failure::usage("this remote is encrypted: joining it takes its key")
            .hint("run `cca sync key` on a machine that syncs with it, then `cca sync init REMOTE --key KEY`")
            .into()),
        (Some(recipient), Some(key)) => {
            let seal = Seal::from_key(key).map_err(|e| Failure::usage(e.to_string()))?;
            if seal.recipient().as_deref() != Some(recipient.as_str()) {
                bail!(Failure::usage("wrong key: this remote is sealed for another key")
                    .hint("copy the key `cca sync key` prints on a machine that syncs with this remote"));
            }
            Ok(seal)
        }
    }
}

/// The key another machine needs to join (`cca sync key`); none for a plain remote.
pub(crate) fn key(store: &Store) -> Result<Option<String>> {
    let state = load(store)?;
    if state.plain {
        return Ok(None);
    }
    Ok(Some(opened_seal(store, &state)?.key_text().unwrap_or_default()))
}

/// Where this machine stands (`cca sync status`), without reaching the remote.
pub(crate) fn status(store: &Store) -> Result<Status> {
    let state = load(store)?;
    let stamps: HashMap<String, u64> = store.session_stamps()?.into_iter().collect();
    let changed = stamps
        .iter()
        .filter(|(id, stamp)| {
            state.sessions.get(*id).is_none_or(|l| l.removed || l.stamp != **stamp)
        })
        .count()
        + state.sessions.iter().filter(|(id, l)| !l.removed && !stamps.contains_key(*id)).count();
    // This machine's commits the remote's branch, as last fetched, lacks.
    let unpushed = Git::new(&store.sync_repo(), true)
        .ok()
        .is_some_and(|git| git.head().is_some() && !git.contains_head());
    Ok(Status {
        unpushed,
        remote: state.remote.clone(),
        name: state.name.clone(),
        encrypted: !state.plain,
        synced_at: state.synced_at.clone(),
        changed,
        sessions: stamps.len(),
    })
}

/// Starts `cca sync --background` and leaves it running, for `sync = "after-turn"`: the turn
/// does not wait for it, and it ends when done (after a sync running already, or at once if
/// another waits behind that one). What it says goes to `$CCA_HOME/sync/sync.log`. A machine
/// not set up to sync starts nothing.
pub(crate) fn after_turn(store: &Store) {
    let Some(cca) = crate::run::own_program() else { return };
    if !store.sync_dir().join("state.json").exists() {
        return;
    }
    if let Ok(log) = store.sync_log() {
        let args = ["sync", "--background", "-q"].map(std::ffi::OsString::from);
        let _ = crate::run::detach(cca, &args, false, &log);
    }
}

/// One sync: send what is new here, take what is new there. `background` (a sync started
/// after a turn) waits for a running sync only when no other waits, and never prompts; otherwise
/// `on_wait` is called when this waits for another sync. `progress` is told (done, of) as
/// sessions are sent and received.
pub(crate) fn sync(
    store: &Store,
    background: bool,
    on_wait: impl FnOnce(),
    progress: &dyn Fn(usize, usize),
) -> Result<Report> {
    let _lock = if background {
        // One background sync waits behind a running sync: it starts after it and sends every
        // turn written by then. Any more give up at once, as that one sends their turns too.
        let Ok(next) = store.lock(".sync-next", false, || {}) else {
            return Ok(Report::default());
        };
        let lock = store.lock(".sync", true, || {})?;
        drop(next);
        lock
    } else {
        store.lock(".sync", true, on_wait)?
    };
    let mut state = load(store)?;
    let seal = opened_seal(store, &state)?;
    let git = Git::new(&store.sync_repo(), background)?;
    let recloned = reclone_if_lost(store, &git, &mut state)?;
    // The remote's description changed since it was made: it, not the key, is to doubt.
    key_fits(store, &seal, || git.changed_since_made(DESCRIPTION))?;
    let mut syncing = Syncing {
        store,
        state,
        seal,
        git,
        report: Report::default(),
        progress,
        newest: None,
        background,
        written: Default::default(),
    };
    if recloned {
        syncing.forget_unpushed()?;
    }
    syncing.run()?;
    Ok(syncing.report)
}

fn load(store: &Store) -> Result<State> {
    let text = store.read_sync_state()?.ok_or_else(|| {
        Failure::usage("this machine does not sync yet")
            .hint("set it up with `cca sync init REMOTE` (a git remote: a bare repository over SSH, a private repository on a forge, a folder)")
    })?;
    serde_json::from_str(&text).map_err(|e| {
        let path = store.sync_dir().join("state.json");
        Failure::new(exit::ERROR, format!("{} cannot be read: {e}", path.display()))
            .hint(format!(
                "it is this machine's place in the sync, not a conversation: move {} away and set this machine up again (`cca sync key` on another machine, then `cca sync init REMOTE --key KEY`); the sessions here are found on the remote as they are",
                store.sync_dir().display()
            ))
            .into()
    })
}

fn save(store: &Store, state: &State) -> Result<()> {
    store.write_sync_state(&serde_json::to_string(state)?)
}

fn opened_seal(store: &Store, state: &State) -> Result<Seal> {
    if state.plain {
        return Ok(Seal::Plain);
    }
    let key = store.read_sync_key()?.ok_or_else(|| {
        Failure::new(exit::ERROR, format!("the sync key {} is missing", store.sync_dir().join("key").display()))
            .hint("copy it from a machine that syncs with this remote (`cca sync key` there) into that file")
    })?;
    let path = store.sync_dir().join("key");
    Seal::from_key(&key).map_err(|e| {
        Failure::new(exit::ERROR, format!("{}: {e}", path.display()))
            .hint("copy the key `cca sync key` prints on a machine that syncs with this remote into that file")
            .into()
    })
}

/// The clone of the remote (`sync/repo`) is a cache of it: one deleted, or left without its
/// git folder, is made again from the remote (`true`), where every git command failed on it
/// for good.
fn reclone_if_lost(store: &Store, git: &Git, state: &mut State) -> Result<bool> {
    let repo = store.sync_repo();
    if repo.join(".git/HEAD").is_file() && !state.recloning {
        return Ok(false);
    }
    // Said before the old one goes: a clone made part-way (a fetch that failed, a kill) is
    // never taken for a whole one.
    state.recloning = true;
    save(store, state)?;
    if repo.exists() {
        std::fs::remove_dir_all(&repo)
            .with_context(|| format!("cannot remove {}", repo.display()))?;
    }
    git.create(&state.remote)?;
    git.fetch()?;
    if git.remote_head().is_some() {
        git.start_at_remote()?;
    }
    Ok(true)
}

/// The id a transcript's header gives (its first line), without reading the rest.
fn header_id(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    let json = line.strip_prefix("<!-- cca:session ")?.strip_suffix(" -->")?;
    let header: serde_json::Value = serde_json::from_str(json).ok()?;
    Some(header.get("id")?.as_str()?.to_string())
}

/// The key kept here must be the one the remote is sealed for (its description, as the clone
/// holds it): records sealed for another key would stop every other machine's sync, so
/// nothing is sent with it. A clone that cannot say is not checked here.
fn key_fits(store: &Store, seal: &Seal, described_again: impl FnOnce() -> bool) -> Result<()> {
    let text = std::fs::read_to_string(store.sync_repo().join(DESCRIPTION));
    let Some(description) = text.ok().and_then(|t| serde_json::from_str::<Description>(&t).ok())
    else {
        return Ok(());
    };
    if description.recipient == seal.recipient() {
        return Ok(());
    }
    let key = store.sync_dir().join("key");
    let failure = match seal {
        // Anyone who can push can change the description: copying another key over the one
        // here would then be the harm.
        _ if described_again() => Failure::new(exit::ERROR, format!(
            "the remote's {DESCRIPTION} was changed since the remote was set up: it names another key than the one here"
        ))
        .hint(format!(
            "if someone set the remote up again with a new key, put that key in {} (`cca sync key` where it was made); if no one did, someone who can push changed that file: put it back from git's history (`git -C {} log -p -- {DESCRIPTION}`); nothing was sent",
            key.display(),
            crate::human::shell_word(&store.sync_repo().to_string_lossy())
        )),
        Seal::Plain => Failure::usage("this machine syncs plain, but the remote is sealed with a key")
            .hint(format!("put the remote's key (`cca sync key` on a machine that syncs with it) in {}", key.display())),
        Seal::Key(_) => Failure::usage(format!("the sync key in {} is not the key this remote is sealed for", key.display()))
            .hint("copy the key `cca sync key` prints on a machine that syncs with this remote into that file; nothing was sent"),
    };
    Err(failure.into())
}

/// A sync under way.
struct Syncing<'a> {
    store: &'a Store,
    state: State,
    seal: Seal,
    git: Git,
    report: Report,
    progress: &'a dyn Fn(usize, usize),
    /// The sessions changed last by other machines' records (those sent at that moment), and
    /// when.
    newest: Option<(String, Vec<String>)>,
    /// Started after a turn: no one waits for it, so it waits for sessions' locks.
    background: bool,
    /// The logs written in this sync, to commit.
    written: std::collections::BTreeSet<String>,
}

impl Syncing<'_> {
    /// After the clone was made again: what this machine wrote and never pushed went with the
    /// old one. A session whose last record is among it is forgotten, to be found on the
    /// remote as it is or sent again as new (no record may follow one the remote lacks: no
    /// other machine could apply it), and so is an image; this machine's own logs are read as
    /// the remote holds them.
    fn forget_unpushed(&mut self) -> Result<()> {
        let repo = self.store.sync_repo();
        let own = format!("{}.log", self.state.machine);
        self.state.logs.retain(|path, _| !path.ends_with(&own));
        let mut pushed = HashSet::new();
        let folders = |dir: &Path| -> Vec<String> {
            let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
            entries.flatten().filter_map(|e| e.file_name().into_string().ok()).collect()
        };
        for bucket in folders(&repo.join(LOGS)) {
            for token in folders(&repo.join(LOGS).join(&bucket)) {
                let path = format!("{LOGS}/{bucket}/{token}/{own}");
                if repo.join(&path).is_file() {
                    pushed.extend(self.read_log(&path)?.into_iter().map(|r| r.id));
                }
            }
        }
        let ours = format!("{}:", self.state.machine);
        self.state.sessions.retain(|_, l| !l.base.starts_with(&ours) || pushed.contains(&l.base));
        let seal = &self.seal;
        self.state.images.retain(|name| repo.join(IMAGES).join(seal.token(name)).is_file());
        self.state.recloning = false;
        save(self.store, &self.state)
    }

    fn run(&mut self) -> Result<()> {
        self.git.clear_stale_locks();
        // Killed between writing records and committing them: look at what it left.
        let unfinished = self.store.sync_writing();
        if unfinished {
            self.recover()?;
        }
        if self.state.receiving {
            // Killed while applying what it had merged: finish that before anything here is
            // taken for a change of this machine's own.
            self.receive()?;
        }
        self.send()?;
        self.git.bulk = self.report.sent > BULK;
        let message = format!("cca sync from {}", self.state.machine);
        if unfinished {
            self.git.commit_all(&message)?;
        } else if !self.written.is_empty() {
            let paths: Vec<&str> = self.written.iter().map(String::as_str).collect();
            self.git.commit(&paths, &message)?;
        }
        self.store.clear_sync_writing()?;
        for attempt in 1..=PUSHES {
            self.git.fetch()?;
            let remote = self.git.remote_head();
            // Emptied, or made again empty: everything this machine holds goes back there.
            let refilling = remote.is_none() && self.state.merged.is_some();
            if remote != self.state.merged || self.state.receiving {
                self.merge_and_take()?;
            }
            let head = self.git.head();
            if head.is_none() || head == remote {
                // Nothing here the remote lacks.
                break;
            }
            match self.git.push()? {
                Pushed::Done => {
                    self.report.remote_refilled = refilling;
                    self.report.sent_earlier = self.report.sent == 0 && !refilling;
                    break;
                }
                Pushed::Behind if attempt < PUSHES => continue,
                Pushed::Behind => bail!(
                    Failure::new(
                        exit::ERROR,
                        "other machines kept pushing first: nothing was pushed"
                    )
                    .hint("what is new here is kept; run `cca sync` again")
                ),
            }
        }
        self.state.synced_at = Some(now());
        save(self.store, &self.state)?;
        self.point_latest();
        Ok(())
    }

    /// Merges what was fetched and applies the other machines' new records; a log that
    /// cannot be read at all (or an image that cannot) undoes the merge. (A record that
    /// cannot be read leaves its session out: [`Syncing::incoming`].)
    fn merge_and_take(&mut self) -> Result<()> {
        let before = self.git.head();
        self.merge()?;
        let incoming = match self.take_new_images().and_then(|()| self.incoming()) {
            Ok(incoming) => incoming,
            Err(e) => {
                // Refused whole: the merge is undone, and the next sync fetches it again.
                if let Some(before) = before {
                    self.git.reset_to(&before);
                }
                return Err(e);
            }
        };
        self.take(incoming)
    }

    /// Takes in this machine's own records that a killed sync wrote to its logs but not to
    /// the state, so they are not sent twice.
    fn recover(&mut self) -> Result<()> {
        let own = format!("{}.log", self.state.machine);
        let mut found = false;
        for path in self.git.uncommitted(LOGS)? {
            if !path.ends_with(&own) {
                continue;
            }
            let records = self.read_log(&path)?;
            *self.state.logs.entry(path).or_default() += records.len() as u64;
            for record in records {
                found = true;
                self.took_own(&record);
            }
        }
        if found {
            save(self.store, &self.state)?;
        }
        Ok(())
    }

    /// Puts one of this machine's own records into the state, as sending it did.
    fn took_own(&mut self, record: &Record) {
        let id = match &record.parent {
            Some(parent) => self.local_at(&record.session, Some(parent)),
            None => Some(record.session.clone()),
        };
        let Some(id) = id else { return };
        let before = self.state.sessions.get(&id).map_or(0, |l| l.len);
        let len = match &record.change {
            Change::Whole { text } => text.len() as u64,
            Change::Append { text } => before + text.len() as u64,
            Change::Remove | Change::Restore => before,
        };
        let removed = match &record.change {
            Change::Remove => true,
            Change::Restore => false,
            _ => self.state.sessions.get(&id).is_some_and(|l| l.removed),
        };
        self.state.sessions.insert(
            id,
            Local {
                session: record.session.clone(),
                base: record.id.clone(),
                len,
                hash: record.hash.clone(),
                removed,
                stamp: 0,
            },
        );
        self.state.next = self.state.next.max(record.seq() + 1);
    }

    /// The local session whose file is the record `parent` of `session`.
    fn local_at(&self, session: &str, parent: Option<&str>) -> Option<String> {
        let parent = parent?;
        self.state
            .sessions
            .iter()
            .find(|(_, l)| l.session == session && l.base == parent)
            .map(|(id, _)| id.clone())
    }

    /// The records of a log not yet taken in, opened and read; any that cannot be is an error
    /// naming it, before anything is applied.
    fn read_log(&self, path: &str) -> Result<Vec<Record>> {
        Ok(self.read_records(path)??)
    }

    /// The records of a log not yet taken in, or the first that cannot be opened or read
    /// (the inner error: damaged, or written by someone else); the outer error is one that
    /// stops the sync (the log cannot be read at all, or was rewritten).
    fn read_records(&self, path: &str) -> Result<std::result::Result<Vec<Record>, Failure>> {
        let bytes = store::read_log(&self.store.sync_repo().join(path))?;
        let lines: Vec<&[u8]> =
            bytes.split_inclusive(|&b| b == b'\n').filter(|l| l.ends_with(b"\n")).collect();
        let seen = self.state.logs.get(path).copied().unwrap_or(0) as usize;
        if lines.len() < seen {
            bail!(rewritten(&format!("its log {path} is shorter than this machine read it")));
        }
        let machine = Path::new(path).file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        let folder = Path::new(path)
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let mut records = Vec::new();
        // A machine numbers its records as it writes them, so a log's grow down it: one that
        // does not (a line the remote's host repeated) was taken in already, and is left out.
        let mut last = None;
        for (n, line) in lines.iter().enumerate().skip(seen.saturating_sub(1)) {
            let line = &line[..line.len() - 1];
            let bad = |why: String| {
                Failure::new(exit::ERROR, format!("record {} of the remote's {path} {why}", n + 1))
                    .hint(
                        "nothing here was changed; a wrong key, or a remote someone else wrote to",
                    )
            };
            let record = match self.seal.open(line).and_then(|o| Record::from_line(&o)) {
                Ok(record) => record,
                Err(why) => return Ok(Err(bad(why))),
            };
            if record.machine_id() != machine || self.seal.token(&record.session) != folder {
                return Ok(Err(bad("is not where its machine wrote it".to_string())));
            }
            if last.is_some_and(|last| record.seq() <= last) {
                continue;
            }
            last = Some(record.seq());
            // The line before the new ones, read for its number only.
            if n + 1 == seen {
                continue;
            }
            records.push(record);
        }
        Ok(Ok(records))
    }

    /// Records what changed here since the last sync in this machine's logs, then the state.
    fn send(&mut self) -> Result<()> {
        let stamps: HashMap<String, u64> = self.store.session_stamps()?.into_iter().collect();
        let mut records = Vec::new();
        let total = stamps.len();
        for (done, (id, stamp)) in stamps.iter().enumerate() {
            if done % 100 == 0 {
                (self.progress)(done, total);
            }
            let known = self.state.sessions.get(id).cloned();
            if known.as_ref().is_some_and(|l| !l.removed && l.stamp == *stamp) {
                continue;
            }
            // After a turn, the sync started by it waits for the turn's lock to be let go.
            let Ok(_lock) = self.store.lock(id, self.background, || {}) else {
                self.report.busy.push(id.clone());
                continue;
            };
            let text = match self.store.read_session_text(id, false) {
                Ok(Some(text)) => text,
                Ok(None) => continue,
                Err(e) => {
                    self.report.skip(id, &e);
                    continue;
                }
            };
            let text_hash = hash(text.as_bytes());
            let mut local = match known {
                Some(local) => local,
                None if let Some(local) = self.already_there(id, &text, *stamp) => local,
                None => {
                    // New here: its first record is its whole text.
                    let len = text.len() as u64;
                    let mut record =
                        self.record(id, None, Change::Whole { text }, text_hash.clone());
                    record.at = self.changed_at(id);
                    let local = Local {
                        session: id.clone(),
                        base: record.id.clone(),
                        len,
                        hash: text_hash,
                        removed: false,
                        stamp: *stamp,
                    };
                    self.state.sessions.insert(id.clone(), local);
                    records.push(record);
                    self.flush_if_large(&mut records)?;
                    continue;
                }
            };
            if local.removed {
                let record = self.record(
                    &local.session,
                    Some(&local.base),
                    Change::Restore,
                    local.hash.clone(),
                );
                local.base = record.id.clone();
                local.removed = false;
                records.push(record);
            }
            if let Some(change) = change_since(local.len, &local.hash, &text) {
                let mut record = self.record(&local.session, Some(&local.base), change, text_hash);
                record.at = self.changed_at(id);
                local.base = record.id.clone();
                local.len = text.len() as u64;
                local.hash = record.hash.clone();
                records.push(record);
            }
            local.stamp = *stamp;
            self.state.sessions.insert(id.clone(), local);
            self.flush_if_large(&mut records)?;
        }
        // Sessions no longer here: in the trash, or deleted, which a machine that still has
        // one takes as the trash (nothing is lost there).
        let gone: Vec<String> = self
            .state
            .sessions
            .iter()
            .filter(|(id, l)| !l.removed && !stamps.contains_key(*id))
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            let mut local = self.state.sessions[&id].clone();
            let record =
                self.record(&local.session, Some(&local.base), Change::Remove, local.hash.clone());
            local.base = record.id.clone();
            local.removed = true;
            local.stamp = 0;
            records.push(record);
            self.state.sessions.insert(id, local);
        }
        self.write_records(&records)?;
        self.report.sent += records.len();
        self.send_images()?;
        // The records written are in the state before they are committed; new stamps alone
        // are saved at the end.
        if self.report.sent > 0 { save(self.store, &self.state) } else { Ok(()) }
    }

    /// Writes the images kept here that the remote does not have yet, each to its own file.
    fn send_images(&mut self) -> Result<()> {
        let repo = self.store.sync_repo();
        for name in self.store.image_names() {
            if self.state.images.contains(&name) {
                continue;
            }
            use base64::Engine as _;
            let bytes = self.store.read_image(&name)?;
            let base64 = base64::engine::general_purpose::STANDARD.encode(bytes);
            let line = serde_json::to_string(&ImageCopy { name: name.clone(), base64 })?;
            let path = format!("{IMAGES}/{}", self.seal.token(&name));
            self.store.mark_sync_writing()?;
            store::write_repo_file(&repo.join(&path), &(self.seal.seal(&line) + "\n"))?;
            self.written.insert(path);
            self.state.images.insert(name);
            self.report.sent += 1;
        }
        Ok(())
    }

    /// Writes the records gathered once they hold [`WRITE_BATCH`] bytes: a first sync of a
    /// large store is not held in memory whole.
    fn flush_if_large(&mut self, records: &mut Vec<Record>) -> Result<()> {
        if records.iter().map(Record::size).sum::<usize>() > WRITE_BATCH {
            self.write_records(records)?;
            self.report.sent += records.len();
            records.clear();
        }
        Ok(())
    }

    /// When a session here last changed (its file's modification time, never later than
    /// now): what a record of its text says, so that another machine points `latest` at the
    /// conversation continued last, not at the one synced last.
    fn changed_at(&self, id: &str) -> String {
        let modified = self.store.session_path(id).metadata().and_then(|m| m.modified());
        let modified = modified.map(chrono::DateTime::<chrono::Utc>::from);
        match modified {
            Ok(at) if at < chrono::Utc::now() => {
                at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            }
            _ => now(),
        }
    }

    /// A new record of this machine's.
    fn record(
        &mut self,
        session: &str,
        parent: Option<&str>,
        change: Change,
        hash: String,
    ) -> Record {
        let id = format!("{}:{}", self.state.machine, self.state.next);
        self.state.next += 1;
        Record {
            id,
            parent: parent.map(str::to_string),
            session: session.to_string(),
            machine: self.state.name.clone(),
            at: now(),
            change,
            hash,
        }
    }

    /// A session here, unknown to this machine's sync, that the remote holds already (a
    /// machine set up again after its `sync` folder was lost, a clone lost with turns it never
    /// pushed, sessions copied from another machine): it continues the record whose text is
    /// the longest start of its own, and what it has beyond is sent as an addition, where it
    /// was sent again whole and came back from every other machine as a fork.
    fn already_there(&self, id: &str, text: &str, stamp: u64) -> Option<Local> {
        // The session it is on the remote: its header's id, which a fork sync made keeps
        // from the machine it came from.
        let session = header_id(text).unwrap_or_else(|| id.to_string());
        let (record, len) = self.longest_start(&session, text)?;
        Some(Local {
            session,
            base: record.id,
            len: len as u64,
            hash: record.hash,
            removed: matches!(record.change, Change::Remove),
            stamp: if len == text.len() { stamp } else { 0 },
        })
    }

    /// The path in the repository of a machine's log for a session.
    fn log_path(&self, session: &str, machine: &str) -> String {
        let token = self.seal.token(session);
        let bucket = &hash(session.as_bytes())[..2];
        format!("{LOGS}/{bucket}/{token}/{machine}.log")
    }

    /// Appends records to this machine's logs (each log once), counting them as read.
    fn write_records(&mut self, records: &[Record]) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        self.store.mark_sync_writing()?;
        let mut by_log: BTreeMap<String, (String, u64)> = BTreeMap::new();
        for record in records {
            let path = self.log_path(&record.session, &self.state.machine);
            let entry = by_log.entry(path).or_default();
            entry.0.push_str(&self.seal.seal(&record.to_line()));
            entry.0.push('\n');
            entry.1 += 1;
        }
        let repo = self.store.sync_repo();
        for (path, (lines, count)) in by_log {
            store::append_log(&repo.join(&path), &lines)?;
            *self.state.logs.entry(path.clone()).or_default() += count;
            self.written.insert(path);
        }
        Ok(())
    }

    /// Merges the remote's branch as fetched. One that lost commits this machine took from it
    /// (set back, or filled again by a machine that was behind) is merged all the same: the
    /// merge is a union, and the push puts back what it lost; a log cut shorter is refused as
    /// it is read. One with no commit in common with this machine's (made anew, by another
    /// `cca sync init`) is another remote: refused.
    fn merge(&mut self) -> Result<()> {
        let Some(remote) = self.git.remote_head() else { return Ok(()) };
        if let Some(merged) = &self.state.merged
            && !self.git.is_ancestor(merged, &remote)
            && !self.git.shares_history("HEAD", &remote)
        {
            bail!(rewritten(&format!(
                "it holds none of the commits this machine took from it ({merged} the last): \
                 it was made anew"
            )));
        }
        self.git.merge()
    }
}

fn rewritten(why: &str) -> Failure {
    Failure::new(exit::ERROR, format!("the remote's history was rewritten: {why}"))
        .hint("nothing here was changed; if that was meant, move $CCA_HOME/sync away and run `cca sync init` again")
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}
