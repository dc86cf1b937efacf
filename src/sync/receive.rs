//! Receiving: the other machines' new records (and images) applied to the sessions here.
//! Every record is opened and read before any is applied; each continues the local session
//! whose file its parent is, or becomes a session of its own: new here, or a continuation made
//! elsewhere of a session continued here too (a fork named after that machine).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

use super::record::{Change, ImageCopy, Record, apply, hash};
use super::{IMAGES, LOGS, Local, Syncing, save};
use crate::error::{Failure, exit};
use crate::store;

impl Syncing<'_> {
    /// Takes the images other machines sent since the last merge, before the sessions that
    /// link to them.
    pub(super) fn take_new_images(&mut self) -> Result<()> {
        use base64::Engine as _;
        let repo = self.store.sync_repo();
        let changed = self.git.changed(self.state.merged.as_deref(), IMAGES)?;
        for path in changed.iter().filter(|p| !self.written.contains(*p)) {
            let bytes = store::read_log(&repo.join(path))?;
            let bad = |why: String| {
                Failure::new(exit::ERROR, format!("the remote's {path} {why}")).hint(
                    "nothing here was changed; a wrong key, or a remote someone else wrote to",
                )
            };
            let line = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
            let opened = self.seal.open(line).map_err(bad)?;
            let image: ImageCopy = serde_json::from_slice(&opened)
                .map_err(|e| bad(format!("is not an image: {e}")))?;
            if self.seal.token(&image.name) != path.rsplit('/').next().unwrap_or_default() {
                bail!(bad("is not where its image belongs".to_string()));
            }
            let data = base64::engine::general_purpose::STANDARD
                .decode(&image.base64)
                .map_err(|_| bad("is not base64".to_string()))?;
            self.store.keep_image_copy(&image.name, &data)?;
            self.state.images.insert(image.name);
        }
        Ok(())
    }

    /// Applies the other machines' new records to the sessions here.
    pub(super) fn receive(&mut self) -> Result<()> {
        self.take_new_images()?;
        let incoming = self.incoming()?;
        self.take(incoming)
    }

    /// The other machines' records merged and not yet taken in, by session: every one opened
    /// and read before any is applied. A session one of whose logs holds a record that cannot
    /// be read (damaged, or written by someone else) is left out, and said
    /// ([`Report::unreadable`]): every other session goes on, where one bad line on the remote
    /// stopped every machine's syncs for good.
    pub(super) fn incoming(&mut self) -> Result<BTreeMap<String, Vec<(String, Record)>>> {
        let own = format!("{}.log", self.state.machine);
        let changed = self.git.changed(self.state.merged.as_deref(), LOGS)?;
        let mut by_session: BTreeMap<String, Vec<(String, Record)>> = BTreeMap::new();
        // A session's logs share its folder.
        let folder = |path: &str| Path::new(path).parent().map(Path::to_path_buf);
        let mut left_out = HashSet::new();
        // Read again by each merge of a sync (a push another machine beat): said once.
        self.report.unreadable.clear();
        for path in changed.iter().filter(|p| !p.ends_with(&own)) {
            match self.read_records(path)? {
                Ok(records) => {
                    for record in records {
                        let session = by_session.entry(record.session.clone()).or_default();
                        session.push((path.clone(), record));
                    }
                }
                Err(bad) => {
                    left_out.insert(folder(path));
                    self.report.unreadable.push(bad.message);
                }
            }
        }
        by_session.retain(|_, records| !records.iter().any(|(p, _)| left_out.contains(&folder(p))));
        Ok(by_session)
    }

    /// Applies records [`Self::incoming`] read.
    pub(super) fn take(
        &mut self,
        by_session: BTreeMap<String, Vec<(String, Record)>>,
    ) -> Result<()> {
        let merged = self.git.remote_head();
        // A receive killed before it saved the state left files this state does not count.
        let recovering = self.state.receiving;
        if !by_session.is_empty() {
            self.state.receiving = true;
            save(self.store, &self.state)?;
        }
        let total = by_session.len();
        let mut deferred = false;
        for (done, (session, records)) in by_session.into_iter().enumerate() {
            if done % 100 == 0 {
                (self.progress)(done, total);
            }
            if recovering {
                self.adopt_left_behind(&session, &records);
            }
            let here = self.already_here(&session, &records);
            for (path, record) in in_order(records) {
                if here.contains(&record.id) {
                    *self.state.logs.entry(path).or_default() += 1;
                    continue;
                }
                if !self.apply(&session, &record)? {
                    // A file of it here that cannot be read is said as such, not as busy
                    // (a fork's too: its id is not the session's).
                    let ours = |id: &String| {
                        *id == session
                            || self.state.sessions.get(id).is_some_and(|l| l.session == session)
                    };
                    if !self.report.skipped.iter().any(|(id, _)| ours(id)) {
                        self.report.busy.push(session.clone());
                    }
                    deferred = true;
                    break;
                }
                *self.state.logs.entry(path).or_default() += 1;
            }
        }
        if total > 0 {
            self.store.sync_sessions()?;
        }
        self.state.receiving = false;
        // Records left for the next sync are looked for from the same commit again.
        if !deferred && self.report.unreadable.is_empty() {
            self.state.merged = merged.or(self.state.merged.take());
        }
        save(self.store, &self.state)
    }

    /// Counts what a receive killed before it saved the state left of `session`: a file made,
    /// or moved on by more than one record, whose text is that of one of the records taken
    /// in now is at that record, and so holds every record before it. Applied again from the
    /// state's count instead, they made a fork of the session beside itself (a file made
    /// that one record later is not the first record's text) or held it back as busy.
    fn adopt_left_behind(&mut self, session: &str, records: &[(String, Record)]) {
        let at: HashMap<&str, &Record> =
            records.iter().map(|(_, r)| (r.hash.as_str(), r)).collect();
        let mut ids: Vec<String> = self
            .state
            .sessions
            .iter()
            .filter(|(_, l)| l.session == session && !l.removed)
            .map(|(id, _)| id.clone())
            .collect();
        ids.push(session.to_string());
        let machines: std::collections::BTreeSet<&str> =
            records.iter().map(|(_, r)| r.machine.as_str()).collect();
        for machine in machines {
            let forks = (1..1000).map(|n| fork_name(session, machine, n));
            ids.extend(forks.take_while(|id| self.store.id_taken(id)));
        }
        for id in ids {
            let known = self.state.sessions.get(&id);
            if known.is_some_and(|l| l.session != session) {
                continue;
            }
            let Ok(Some(text)) = self.store.read_session_text(&id, false) else { continue };
            let now = hash(text.as_bytes());
            let Some(record) = at.get(now.as_str()).filter(|_| known.is_none_or(|l| l.hash != now))
            else {
                continue;
            };
            let new_here = known.is_none();
            self.counted(id, session, record, text.len() as u64, new_here);
        }
    }

    /// Of a session's records, those a session here holds already: the one it continues
    /// (its base) and every one before it. Normally none, as each is counted taken when
    /// applied; a session found on the remote as it is here (`Syncing::already_there`) has
    /// them all.
    fn already_here(&self, session: &str, records: &[(String, Record)]) -> HashSet<String> {
        let mut parent: HashMap<String, Option<String>> =
            records.iter().map(|(_, r)| (r.id.clone(), r.parent.clone())).collect();
        let bases: Vec<&str> = self
            .state
            .sessions
            .values()
            .filter(|l| l.session == session)
            .map(|l| l.base.as_str())
            .collect();
        // A base of this machine's own (a turn sent on top of a session found on the remote)
        // leads through its own records, which are not among those taken in: read them.
        let own = format!("{}:", self.state.machine);
        if bases.iter().any(|base| base.starts_with(&own)) {
            let path = self.log_path(session, &self.state.machine);
            let own = self.records_in(&self.store.sync_repo().join(path)).unwrap_or_default();
            parent.extend(own.into_iter().map(|record| (record.id, record.parent)));
        }
        let incoming: HashSet<&str> = records.iter().map(|(_, r)| r.id.as_str()).collect();
        let mut here = HashSet::new();
        for base in bases {
            let mut at = Some(base.to_string());
            let mut walked = HashSet::new();
            while let Some(id) = at.filter(|id| parent.contains_key(id)) {
                if !walked.insert(id.clone()) {
                    break;
                }
                at = parent[&id].clone();
                if incoming.contains(id.as_str()) {
                    here.insert(id);
                }
            }
        }
        here
    }

    /// Applies one record of another machine's; false when the session it changes is busy
    /// (a turn is running in it, or changed it since this sync sent it): left for the next sync.
    fn apply(&mut self, session: &str, record: &Record) -> Result<bool> {
        if let Some(id) = self.local_at(session, record.parent.as_deref()) {
            return self.continue_local(&id, record);
        }
        match &record.change {
            // The branch it removes or restores is not here: nothing to do.
            Change::Remove | Change::Restore => Ok(true),
            Change::Whole { .. } | Change::Append { .. } => self.make_local(session, record),
        }
    }

    /// Applies a record to the local session whose file its parent is.
    fn continue_local(&mut self, id: &str, record: &Record) -> Result<bool> {
        let Ok(_lock) = self.store.lock(id, self.background, || {}) else { return Ok(false) };
        let local = self.state.sessions[id].clone();
        // A file that cannot be read (hand-edited into another encoding, say) waits with its
        // records for the next sync; every other session goes on.
        let text = match self.store.read_session_text(id, local.removed) {
            Ok(Some(text)) => text,
            Ok(None) if !self.store.id_taken(id) => return self.revive(id, local, record),
            Ok(None) => return Ok(false),
            Err(e) => {
                self.report.skip(id, &e);
                return Ok(false);
            }
        };
        let now = hash(text.as_bytes());
        let removed = match record.change {
            Change::Remove => true,
            Change::Restore => false,
            _ => local.removed,
        };
        if now == local.hash {
            match &record.change {
                Change::Append { text: added } if !local.removed => {
                    self.store.append_to_session(id, added)?;
                    self.continued(id);
                    self.touched(id, record);
                }
                Change::Append { .. } | Change::Whole { .. } => {
                    let changed = apply(&text, &record.change);
                    self.store.replace_session(id, &changed, local.removed)?;
                    self.continued(id);
                    // A hand edit or a name elsewhere is no reason for `,` here to move to it:
                    // only a conversation held on (a record more) is.
                    if !local.removed && answers(&changed) > answers(&text) {
                        self.touched(id, record);
                    }
                }
                Change::Remove if !local.removed => {
                    let repointed = self.store.remove(id, false)?;
                    // `latest` followed it: said, as a local `cca rm` says it.
                    match repointed {
                        crate::store::Repointed::To(now) => {
                            self.report.latest_removed = Some((id.to_string(), Some(now)));
                        }
                        crate::store::Repointed::Nowhere => {
                            self.report.latest_removed = Some((id.to_string(), None));
                        }
                        crate::store::Repointed::No => {}
                    }
                    self.report.removed.push(id.to_string());
                }
                Change::Restore if local.removed => {
                    self.store.restore(id)?;
                    self.report.restored.push(id.to_string());
                }
                Change::Remove | Change::Restore => {}
            }
        } else if now != record.hash {
            // Changed here since it was sent: sent next time, and this record then forks.
            return Ok(false);
        }
        let len = apply(&text, &record.change).len() as u64;
        let stamp = if removed { 0 } else { self.store.session_stamp(id).unwrap_or(0) };
        self.state.sessions.insert(
            id.to_string(),
            Local {
                session: local.session,
                base: record.id.clone(),
                len,
                hash: record.hash.clone(),
                removed,
                stamp,
            },
        );
        Ok(true)
    }

    /// A record of a session deleted here for good (`rm --purge`, or its file deleted by hand)
    /// that another machine goes on with: a removal is noted; anything else makes the session
    /// here again from the remote's records, as one new here, where it waited for a file that
    /// would never come back.
    fn revive(&mut self, id: &str, local: Local, record: &Record) -> Result<bool> {
        if matches!(record.change, Change::Remove) {
            let base = record.id.clone();
            let noted = Local { base, hash: record.hash.clone(), removed: true, ..local };
            self.state.sessions.insert(id.to_string(), noted);
            return Ok(true);
        }
        self.state.sessions.remove(id);
        self.make_local(&local.session, record)
    }

    /// A record no local session can take: a session new here, or a continuation made
    /// elsewhere of one continued here too, which becomes a fork named after its machine.
    fn make_local(&mut self, session: &str, record: &Record) -> Result<bool> {
        let text = match &record.parent {
            None => apply("", &record.change),
            Some(parent) => apply(&self.text_at(session, parent)?, &record.change),
        };
        if hash(text.as_bytes()) != record.hash {
            bail!(
                Failure::new(exit::ERROR, format!("the remote's record {} of session {session} does not give the text it names", record.id))
                    .hint("nothing here was changed by it; a remote someone else wrote to")
            );
        }
        // Its own id, unless that is taken here by another session (two machines made one in
        // the same second) or it continues a session already here in another way.
        // (A continuation is made under the session's own id too when no session here holds
        // it: one deleted here for good, that another machine went on with.)
        let own_id = !self.state.sessions.values().any(|l| l.session == session);
        let candidates = std::iter::once(session.to_string())
            .filter(|_| own_id)
            .chain((1..).map(|n| fork_name(session, &record.machine, n)));
        let mut made = None;
        for id in candidates.take(1000) {
            if self.state.sessions.contains_key(&id) {
                continue;
            }
            if self.store.id_taken(&id) {
                // Made by a sync killed before it saved its state: the same text is that one.
                let there = self.store.read_session_text(&id, false).ok().flatten();
                if there.is_some_and(|t| hash(t.as_bytes()) == record.hash) {
                    made = Some(id);
                    break;
                }
                continue;
            }
            // Made durable with the others at the end of the receive (`sync_sessions`).
            if self.store.create_session_as_unsynced(&id, &text)? {
                made = Some(id);
                break;
            }
        }
        let id = made.context("no free id for a session taken from the remote")?;
        self.counted(id, session, record, text.len() as u64, true);
        Ok(true)
    }

    /// Counts the session file `id` (`len` bytes) at `record` of `session`; one `new_here` is
    /// said: new here, or a fork named after its machine.
    fn counted(&mut self, id: String, session: &str, record: &Record, len: u64, new_here: bool) {
        if new_here {
            let named = (id.clone(), session.to_string(), record.machine.clone());
            match () {
                _ if id == session => self.report.new.push(id.clone()),
                // Not a continuation: a conversation of its own that only shares the id.
                _ if record.parent.is_none() => self.report.same_id.push(named),
                _ => self.report.forks.push(named),
            }
        }
        self.touched(&id, record);
        let stamp = self.store.session_stamp(&id).unwrap_or(0);
        let local = Local {
            session: session.to_string(),
            base: record.id.clone(),
            len,
            hash: record.hash.clone(),
            removed: false,
            stamp,
        };
        self.state.sessions.insert(id, local);
    }

    /// A session's text as the record `at` left it, rebuilt from every log of the session.
    fn text_at(&self, session: &str, at: &str) -> Result<String> {
        let records: HashMap<String, Record> = self
            .session_records(session)?
            .into_iter()
            .map(|(_, record)| (record.id.clone(), record))
            .collect();
        let mut chain = Vec::new();
        let mut next = Some(at.to_string());
        while let Some(id) = next {
            let record = records.get(&id).with_context(|| {
                format!("the remote holds no record {id} of session {session}, which a later one follows")
            })?;
            chain.push(record);
            if matches!(record.change, Change::Whole { .. }) || chain.len() > records.len() {
                break;
            }
            next = record.parent.clone();
        }
        Ok(chain.iter().rev().fold(String::new(), |text, record| apply(&text, &record.change)))
    }

    /// Every record the remote holds of a session, every machine's, with its log.
    pub(super) fn session_records(&self, session: &str) -> Result<Vec<(String, Record)>> {
        let repo = self.store.sync_repo();
        let folder = Path::new(&self.log_path(session, "x"))
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let mut records = Vec::new();
        for entry in std::fs::read_dir(repo.join(&folder)).into_iter().flatten().flatten() {
            let path = folder.join(entry.file_name()).to_string_lossy().into_owned();
            records.extend(self.records_in(&entry.path())?.into_iter().map(|r| (path.clone(), r)));
        }
        Ok(records)
    }

    /// The records of a log that open and read, every one, whether taken in or not.
    fn records_in(&self, log: &Path) -> Result<Vec<Record>> {
        let bytes = store::read_log(log)?;
        Ok(bytes
            .split(|&b| b == b'\n')
            .filter(|line| !line.is_empty())
            .filter_map(|line| self.seal.open(line).and_then(|o| Record::from_line(&o)).ok())
            .collect())
    }

    /// The record of `session` on the remote whose text is the longest start of `text`, with
    /// that text's length; none when no record's is.
    pub(super) fn longest_start(&self, session: &str, text: &str) -> Option<(Record, usize)> {
        let records = self.session_records(session).ok()?;
        // Each record's text as a length of `text`, when it is a start of it: nothing copied.
        let mut start: HashMap<String, usize> = HashMap::new();
        let mut found: Vec<(Record, usize)> = Vec::new();
        for (_, record) in in_order(records) {
            let before = match &record.parent {
                None => Some(0),
                Some(parent) => start.get(parent).copied(),
            };
            let len = match (&record.change, before) {
                (Change::Whole { text: whole }, _) => {
                    text.starts_with(whole.as_str()).then_some(whole.len())
                }
                (Change::Append { text: added }, Some(at)) => text
                    .get(at..)
                    .is_some_and(|rest| rest.starts_with(added.as_str()))
                    .then(|| at + added.len()),
                (Change::Remove | Change::Restore, at) => at,
                (Change::Append { .. }, None) => None,
            };
            let Some(len) = len else { continue };
            start.insert(record.id.clone(), len);
            found.push((record, len));
        }
        // The bytes say each is a start; its hash says the record is what it claims to be,
        // checked for the longest only (hashing every record's text would be quadratic).
        found.reverse();
        found.sort_by_key(|(_, len)| std::cmp::Reverse(*len));
        found.into_iter().find(|(record, len)| hash(&text.as_bytes()[..*len]) == record.hash)
    }

    /// Points `latest` at the session continued most recently elsewhere, when that was
    /// after the last activity here: `,` then continues the conversation the user just left
    /// on the other machine.
    pub(super) fn point_latest(&mut self) {
        let Some((at, ids)) = self.newest.clone() else { return };
        // Sent at the same moment (a machine's first sync sends every session at once): the
        // one of them held last.
        let id = match ids.as_slice() {
            [one] => one.clone(),
            [first, rest @ ..] if rest.iter().all(|id| id == first) => first.clone(),
            _ => {
                let Ok(mut listed) = self.store.listing() else { return };
                let ids: HashSet<&String> = ids.iter().collect();
                listed.retain(|l| ids.contains(&l.id));
                crate::store::newest_first(&mut listed);
                let Some(newest) = listed.into_iter().next() else { return };
                newest.id
            }
        };
        let Ok(at) = chrono::DateTime::parse_from_rfc3339(&at) else { return };
        let current = self.store.latest().ok().flatten();
        if current.as_deref() == Some(id.as_str()) {
            return;
        }
        let here = current
            .and_then(|c| self.store.session_path(&c).metadata().ok()?.modified().ok())
            .map(chrono::DateTime::<chrono::Utc>::from);
        if here.is_none_or(|here| at > here) && self.store.set_latest(&id).is_ok() {
            self.report.latest = Some(id);
        }
    }

    /// Reports a session continued elsewhere, unless it came new in this sync (then it is new
    /// here, as a whole).
    fn continued(&mut self, id: &str) {
        if !self.report.new.iter().any(|new| new == id) {
            self.report.continued.push(id.to_string());
        }
    }

    /// Notes a session changed by another machine's record, for [`Self::point_latest`].
    fn touched(&mut self, id: &str, record: &Record) {
        match &mut self.newest {
            Some((at, ids)) if record.at == *at => ids.push(id.to_string()),
            Some((at, _)) if record.at < *at => {}
            _ => self.newest = Some((record.at.clone(), vec![id.to_string()])),
        }
    }
}

/// How many answers (and attempts at one) a transcript holds.
fn answers(text: &str) -> usize {
    use crate::transcript::Kind;
    let Ok((transcript, _)) = crate::transcript::parse(text) else { return 0 };
    let answer = |k: Kind| matches!(k, Kind::Assistant | Kind::Failed | Kind::Interrupted);
    transcript.records.iter().filter(|r| answer(r.kind)).count()
}

/// Records of several logs in an order where each comes after the one it follows (each
/// log's own order kept).
fn in_order(records: Vec<(String, Record)>) -> Vec<(String, Record)> {
    let mut pending = records;
    let mut ordered = Vec::with_capacity(pending.len());
    let mut done: HashSet<String> = HashSet::new();
    while !pending.is_empty() {
        let waiting: HashSet<String> = pending.iter().map(|(_, r)| r.id.clone()).collect();
        let mut blocked_logs: HashSet<String> = HashSet::new();
        let mut rest = Vec::new();
        for (path, record) in pending {
            let ready = !blocked_logs.contains(&path)
                && record.parent.as_ref().is_none_or(|p| !waiting.contains(p) || done.contains(p));
            if ready {
                done.insert(record.id.clone());
                ordered.push((path, record));
            } else {
                blocked_logs.insert(path.clone());
                rest.push((path, record));
            }
        }
        if rest.len() == waiting.len() {
            // A cycle, which no machine writes: taken as they are.
            ordered.extend(rest);
            break;
        }
        pending = rest;
    }
    ordered
}

/// The name of a fork holding another machine's continuation: the session's id and the
/// machine's name, as an id allows it.
fn fork_name(session: &str, machine: &str, n: u32) -> String {
    let machine: String = machine
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' })
        .take(40)
        .collect();
    let machine = match machine {
        _ if machine.is_empty() => "elsewhere".to_string(),
        // Digits alone (`--name 2`) would read as the count of a second's sessions (`X-2`).
        _ if !machine.chars().any(|c| c.is_ascii_alphabetic()) => format!("machine-{machine}"),
        machine => machine,
    };
    let base: String = format!("{session}-{machine}").chars().take(120).collect();
    if n == 1 { base } else { format!("{base}-{n}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fork_is_named_after_its_machine_as_an_id_never_as_a_count() {
        let fork = |machine| fork_name("20261121-101500", machine, 1);
        assert_eq!(fork("laptop"), "20261121-101500-laptop");
        assert_eq!(fork("host.local"), "20261121-101500-host-local");
        assert_eq!(fork(""), "20261121-101500-elsewhere");
        assert_eq!(fork("2"), "20261121-101500-machine-2");
        assert_eq!(fork_name("20261121-101500", "laptop", 2), "20261121-101500-laptop-2");
        assert!(crate::store::validate_id(&fork("host.local")).is_ok());
    }
}
