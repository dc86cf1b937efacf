//! Recall: finding past exchanges by what they were about, ranked (BM25 over question, answer
//! and the session's title and name, English stemming and stop words, quoted phrases, a few
//! synonyms at half weight, plus the whole session's BM25 score as one document, recency as a
//! mild prior, and closeness in meaning from word vectors), from an index that is a cache of
//! the transcripts.
//!
//! The transcripts stay the truth. The index (`$CCA_HOME/recall/index/`) is brought up to date
//! when a search runs, never by a turn: each session's file stamp (size, times, inode) is compared
//! with the one its exchanges were indexed from, and only sessions that changed are read again. A
//! turn leaves only a hint of the session it changed (`recall/changed`): the next search reads the
//! sessions it names while it stamps the rest, and searches them beside the index (`overlay`)
//! rather than committing them, while they are few and short. An index that cannot be read, or
//! that another version wrote, is rebuilt with a note; one deleted is rebuilt in silence. Updates
//! take a lock of their own (never a session's), so a search never waits for a turn and a turn
//! never waits for a search.
//!
//! This file is the driver; the rooms are `exchanges` (what one exchange is), `question` (how a
//! question is read), `index` (tantivy, and its files), `stamps` (the file of what the index
//! holds of each session), `overlay` (sessions searched beside the index, and the file it is
//! kept in), `sessions` (a whole session's score, from its exchanges), `meaning` (word vectors),
//! `stems` (stemming that remembers), `directory` (where tantivy writes, without flushing) and
//! `excerpt` (the words shown around what was found). The folder and the lock are the store's.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use anyhow::{Result, anyhow};
use chrono::{DateTime, Utc};

use crate::store::{SessionsWatch, Stamp, Stamped, Store};
use crate::transcript::Header;

mod analysis;
mod context;
mod directory;
mod excerpt;
mod exchanges;
mod facet;
mod index;
mod meaning;
mod overlay;
mod phrases;
mod question;
mod sessions;
mod stamps;
mod stems;

pub(crate) use index::Filter;
use index::{Index, Session};
use overlay::Overlay;
use question::Question;
#[cfg(any(test, feature = "testing"))]
pub(crate) use question::SYNONYMS;
use stamps::Stamps;

/// The index's folder under the recall folder.
const INDEX_DIR: &str = "index";
/// How many sessions are read between commits of a long update: a build stopped part-way
/// (Ctrl-C, a crash) keeps what was committed, and the next search goes on from there.
const COMMIT_EVERY: usize = 2_000;
/// An update that read at least this many sessions (a first build, a large import) ends by
/// merging the index into one segment: a search opens each segment and looks in each, and a
/// turn's update applies its deletes to each, so the twenty segments a build of 10,000
/// sessions wrote cost every later search about 10 ms; merging them took 3.5 s on the
/// benchmark's store, once. Smaller updates leave their segments to the merge policy.
const MERGE_FROM: usize = 1_000;
/// Sessions turns changed since the index's last commit are read at each search into an
/// overlay of the index ([`Overlay`]) rather than committed, while there are at most this many
/// of them, of at most [`OVERLAY_BYTES`] in all: a commit costs a search over 10,000 sessions
/// about 15 ms, reading a short session again well under one.
const OVERLAY_SESSIONS: usize = 16;
const OVERLAY_BYTES: usize = 256 << 10;
/// Where the last overlay read is kept, under the recall folder ([`Overlay::keep`]).
const OVERLAY_FILE: &str = "overlay";
/// How many of the best by words are weighed again with their session, their age and what
/// they mean.
const CANDIDATES: usize = 200;
/// How much of its session's score, the whole session scored as one document (`sessions`), is
/// added to an exchange's: a question often names what the conversation was about (its
/// project, the people in it) while the exchange that answers it does not. Chosen on half the evaluation's
/// questions (benches/recall; 1, 2 and 3 tried, 2 and 3 tied there), see BENCHMARKS.md.
const SESSION_SHARE: f32 = 2.0;
/// Recency as a mild prior: an exchange from today scores up to this much more than one from
/// long ago, half of it after [`HALF_LIFE_DAYS`].
const RECENCY: f32 = 0.1;
const HALF_LIFE_DAYS: f32 = 30.0;
/// How much closeness in meaning (`meaning`: the question's to the exchange's, plus to its
/// session's, each a cosine) counts beside the score by words, taken as a share of the best
/// candidate's. Chosen on half the evaluation's questions (0.5, 1, 1.5 and 2 tried), see
/// BENCHMARKS.md.
const MEANING_WEIGHT: f32 = 1.0;

/// An exchange found.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub session: String,
    /// The session's header (title, name, engine, folder).
    pub header: Header,
    /// 1-based, as `cca show` numbers it.
    pub exchange: u64,
    /// When it was answered (RFC 3339), if the transcript says.
    pub at: Option<String>,
    /// Whether it was: a failed or interrupted attempt, or a question still being answered, is
    /// found too.
    pub answered: bool,
    pub score: f32,
    /// A few lines around the words found.
    pub excerpt: String,
    /// Other sessions that hold the same exchange, word for word (a fork and its original,
    /// a conversation imported twice), each shown here rather than as a result of its own.
    pub also_in: Vec<String>,
}

/// What a search is told as it goes: notes (an index rebuilt, and why), and how far an update
/// that reads many sessions has come.
pub(crate) trait Progress: Sync {
    fn note(&self, text: &str);
    /// `done` of `total` sessions read.
    fn reading(&self, done: usize, total: usize);
    fn finished(&self);
}

/// Sessions to read before a progress is shown at all.
pub(crate) const PROGRESS_FROM: usize = 200;

/// What a server keeps between its searches: a watch on the sessions folder, so that only the
/// sessions it was told of are stat'ed again, and the last overlay read, so that sessions
/// turns changed are not read again while their files and the index stay as they were.
#[derive(Default)]
pub(crate) struct Warm {
    watch: SessionsWatch,
    /// With the digest of what it was read from ([`overlay_for`]).
    overlay: std::sync::Mutex<Option<(u64, Overlay)>>,
}

/// The `limit` exchanges that best answer `text`, best first, among those `filter` lets
/// through, after bringing the index up to date with the store: with every session stat'ed
/// for a change, or with what `warm` (a server's, kept between searches) holds.
pub(crate) fn recall(
    store: &Store,
    warm: Option<&Warm>,
    text: &str,
    filter: &Filter,
    limit: usize,
    now: DateTime<Utc>,
    progress: &dyn Progress,
) -> Result<Vec<Found>> {
    let stamper = Stamper { store, warm };
    let (found, unread) = search(&stamper, text, filter, limit, now, progress)?;
    note_unread(progress, &unread);
    Ok(found)
}

/// What a search found, with the sessions the index it searched could not read.
type Searched = (Vec<Found>, Vec<(String, String)>);

/// Where a search learns which sessions changed: a stat of each, or a watch's word.
struct Stamper<'a> {
    store: &'a Store,
    warm: Option<&'a Warm>,
}

impl Stamper<'_> {
    fn stamps(&self) -> Result<Vec<(String, Stamp)>> {
        match self.warm {
            Some(warm) => warm.watch.stamps(self.store),
            None => self.store.session_stamps(),
        }
    }

    /// The stamps, taken while this thread does `meanwhile`; a stat of each session is then
    /// helped with by this thread ([`Store::session_stamps_beside`]), a watch's word waited for.
    fn stamps_beside<T>(&self, meanwhile: impl FnOnce() -> T) -> (Result<Stamped>, T) {
        let Some(warm) = self.warm else { return self.store.session_stamps_beside(meanwhile) };
        std::thread::scope(|scope| {
            let stamping = scope.spawn(|| warm.watch.stamps(self.store).map(Stamped::of));
            let done = meanwhile();
            let stamps =
                stamping.join().unwrap_or_else(|_| Err(anyhow!("cannot stat the sessions")));
            (stamps, done)
        })
    }
}

/// [`recall`]'s work: the index brought up to date, then searched.
fn search(
    stamper: &Stamper,
    text: &str,
    filter: &Filter,
    limit: usize,
    now: DateTime<Utc>,
    progress: &dyn Progress,
) -> Result<Searched> {
    let store = stamper.store;
    let question = question::parse(text);
    // Nothing kept yet: nothing to find, and no reason to make a folder for it.
    if !store.recall_dir().exists() && stamper.stamps()?.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let dir = index_dir(store);
    let searched = |index: &Index, overlay: Option<&Overlay>| -> Result<Searched> {
        let found = found(store, index, overlay, &question, filter, limit, now)?;
        // What the overlay read is not unread.
        let overlaid = |id: &String| overlay.is_some_and(|o| o.holds(id));
        let unread = index.unread().iter().filter(|(id, _)| !overlaid(id)).cloned().collect();
        Ok((found, unread))
    };
    // The index searched as it is, with the digest of its last commit.
    let as_it_is = || {
        let (index, digest) = Index::open(&dir).ok()?;
        Some((digest, searched(&index, None).ok()?))
    };
    // Stamping the store (a stat of every session) is most of what a search over thousands of
    // sessions costs, so something else is done meanwhile.
    let (stamps, early) = match hinted_change(store, &dir) {
        // Turns since the index's last commit: their sessions are read (or, when they are
        // many or long, brought into the index) and searched with it meanwhile; what was
        // found stands if nothing else changed.
        Some(ids) => {
            let (stamps, hinted) = stamper.stamps_beside(|| {
                take_in_hinted(store, &ids, stamper.warm, progress).map(|hinted| {
                    let found = match &hinted {
                        Hinted::Read { index, overlay, .. } => searched(index, overlay.as_ref()),
                        Hinted::Committed(index) => searched(index, None),
                    };
                    (hinted, found)
                })
            });
            let stamps = stamps?;
            let store_digest = stamps.digest();
            match hinted {
                Some((hinted, found)) => {
                    // The store as the index and what was taken in hold it.
                    let expected = match &hinted {
                        Hinted::Read { index, held, .. } => {
                            held.digest_with(&stamps, index.digest())
                        }
                        Hinted::Committed(index) => index.digest(),
                    };
                    match found {
                        Ok(found) if expected == store_digest => {
                            if let Hinted::Read { overlay: None, .. } = hinted {
                                // Nothing the index lacks: the hint was done already.
                                store.remove_changed_hint();
                            }
                            return Ok(found);
                        }
                        // Something else changed too: the usual update takes it in, and if
                        // it cannot, this is what is found.
                        Ok(found) => (stamps, Some((expected, found))),
                        Err(_) => (stamps, None),
                    }
                }
                // The index could not take them in (a folder made read-only, a full disk):
                // what it holds is found all the same, as below.
                None => (stamps, as_it_is()),
            }
        }
        // Otherwise the index is searched as it is meanwhile: most searches find nothing
        // changed, and then what was found stands.
        None => {
            let (stamps, early) = stamper.stamps_beside(as_it_is);
            (stamps?, early)
        }
    };
    let store_digest = stamps.digest();
    let early = match early {
        Some((digest, searched)) if digest == store_digest => return Ok(searched),
        Some((_, searched)) => Some(searched),
        None => None,
    };
    let index = match fresh_index(store, &stamps.into_stamps(), store_digest, progress) {
        Ok(index) => index,
        Err(e) => return cannot_update(&dir, e, early, progress),
    };
    match searched(&index, None) {
        Ok(searched) => Ok(searched),
        Err(e) if index::is_machine_fault(&e, &dir) => cannot_update(&dir, e, early, progress),
        Err(e) => {
            // Unreadable past what opening checks (a damaged segment): never trusted.
            let index = rebuild(stamper, &format!("{e:#}"), progress)?;
            searched(&index, None)
        }
    }
}

/// Why `text` can find nothing, whatever the store holds, when it cannot: it has no word, or
/// only words too common to be searched for ("the", "of").
pub(crate) fn why_nothing_can_be_found(text: &str) -> Option<&'static str> {
    let question = question::parse(text);
    if question.words.is_empty() {
        return Some("the question has no word to search for");
    }
    (!analysis::any_indexed(&question.words))
        .then_some("every word of the question is too common to be searched for")
}

/// An index that cannot be brought up to date (a folder made read-only, a full disk): what it
/// held is found all the same, with a note that the latest changes are not in it; with
/// nothing to search, the error says what to do.
fn cannot_update(
    dir: &std::path::Path,
    e: anyhow::Error,
    early: Option<Searched>,
    progress: &dyn Progress,
) -> Result<Searched> {
    let what = format!("the recall index in {} cannot be brought up to date", dir.display());
    let hint = "check that folder's permissions and the disk's free space; removing it loses nothing (the next search rebuilds it from the transcripts)";
    match early {
        Some(found) => {
            progress.note(&format!(
                "recall: {what} ({e:#}); these results leave out the latest changes. Hint: {hint}"
            ));
            Ok(found)
        }
        None => {
            Err(crate::error::Failure::new(crate::error::exit::ERROR, format!("{what}: {e:#}"))
                .hint(hint)
                .into())
        }
    }
}

/// The `limit` exchanges of `index` that best answer `question`, weighed with their session
/// and their age, each with its excerpt from the session's file.
fn found(
    store: &Store,
    index: &Index,
    overlay: Option<&Overlay>,
    question: &Question,
    filter: &Filter,
    limit: usize,
    now: DateTime<Utc>,
) -> Result<Vec<Found>> {
    let hits = index.search(question, filter, limit.max(CANDIDATES), overlay)?;
    let mut weighed: Vec<(f32, index::Hit)> = hits
        .into_iter()
        .map(|hit| ((hit.score + SESSION_SHARE * hit.session_score) * prior(hit.at, now), hit))
        .collect();
    weigh_meaning(&mut weighed, question);
    // Best first; on a tie, the newer session, then the earlier exchange: the same order
    // whatever order the index holds them in.
    weighed.sort_by(|(a, x), (b, y)| {
        b.total_cmp(a)
            .then_with(|| {
                crate::store::sort_key_of(&y.session).cmp(&crate::store::sort_key_of(&x.session))
            })
            .then(x.number.cmp(&y.number))
    });
    // An attempt and the exchange that followed it share a number: the better stands for both.
    let mut seen = std::collections::HashSet::new();
    weighed.retain(|(_, hit)| seen.insert((hit.session.clone(), hit.number)));
    // Of each session, only the exchanges that may be found are read out of it.
    let mut numbers: HashMap<String, Vec<u64>> = HashMap::new();
    for (_, hit) in &weighed {
        numbers.entry(hit.session.clone()).or_default().push(hit.number);
    }
    let mut found: Vec<Found> = Vec::with_capacity(limit.min(weighed.len()));
    // Each session's file is read once however many of its exchanges were found.
    let mut read: BTreeMap<String, Option<(Header, Vec<exchanges::Exchange>)>> = BTreeMap::new();
    // A fork repeats its original's exchanges, word for word (so does a conversation
    // imported twice): each is one result, which names the other sessions that hold it.
    let mut said: std::collections::HashMap<(String, String), usize> = Default::default();
    // Each result's number and score by its words alone: a candidate past the limit is read
    // only when it could repeat one (the same words score the same).
    let mut scored: Vec<(u64, f32)> = Vec::new();
    for (score, hit) in weighed {
        let could_repeat = scored
            .iter()
            .any(|&(n, s)| n == hit.number && (s - hit.score).abs() <= 1e-4 * s.abs().max(1.0));
        if found.len() == limit && !could_repeat && !read.contains_key(&hit.session) {
            continue;
        }
        let session = read.entry(hit.session.clone()).or_insert_with(|| {
            let bytes = store.read_session_bytes(&hit.session).ok()?;
            let wanted = numbers.get(hit.session.as_str()).map_or(&[][..], Vec::as_slice);
            exchanges::exchanges_numbered(&bytes, |n| wanted.contains(&n)).ok()
        });
        // Gone or changed since the index was brought up to date: the next search has it.
        let Some((header, all)) = session else { continue };
        // Of an attempt and the exchange after it, the one whose words matched best.
        let words = |e: &&exchanges::Exchange| excerpt::matched(e, &question.words);
        let Some(exchange) = all.iter().filter(|e| e.number == hit.number).max_by_key(words) else {
            continue;
        };
        let key = (exchange.question.clone(), exchange.answer.clone());
        if let Some(&first) = said.get(&key) {
            let first = &mut found[first];
            if first.session != hit.session && !first.also_in.contains(&hit.session) {
                first.also_in.push(hit.session.clone());
            }
            continue;
        }
        if found.len() == limit {
            continue;
        }
        said.insert(key, found.len());
        scored.push((hit.number, hit.score));
        found.push(Found {
            session: hit.session.clone(),
            header: header.clone(),
            exchange: hit.number,
            at: exchange.at.clone(),
            answered: exchange.answered,
            score,
            excerpt: excerpt::excerpt(exchange, &question.words),
            also_in: Vec::new(),
        });
    }
    Ok(found)
}

/// Each candidate's score by words as a share of the best, plus [`MEANING_WEIGHT`] times how
/// close the question is to the exchange and to its session, seen from the candidates' mean
/// ([`meaning::closeness`]), times the share of the question's words the table holds: its
/// vector speaks for those only, and a name or identifier it lacks is left to the words' own
/// score. A question none of whose words the table holds is ranked by its words alone.
fn weigh_meaning(weighed: &mut [(f32, index::Hit)], question: &Question) {
    let best = weighed.iter().map(|(score, _)| *score).fold(0.0, f32::max);
    if best > 0.0 {
        weighed.iter_mut().for_each(|(score, _)| *score /= best);
    }
    let text = question.words.join(" ");
    let Some(asked) = meaning::of_text(&text) else { return };
    let Some(centre) = meaning::mean(weighed.iter().filter_map(|(_, hit)| hit.meaning.as_ref()))
    else {
        return;
    };
    let trust = meaning::known_share(&text);
    let close = |v: &Option<meaning::Vector>| {
        v.as_ref().map_or(0.0, |v| meaning::closeness(&asked, v, &centre))
    };
    for (score, hit) in weighed.iter_mut() {
        let meant = close(&hit.meaning) + close(&hit.session_meaning);
        *score += MEANING_WEIGHT * trust * meant;
    }
}

/// Mild: a recent exchange wins a near tie, never against a much better match.
fn prior(at: Option<i64>, now: DateTime<Utc>) -> f32 {
    let Some(at) = at else { return 1.0 };
    let days = ((now.timestamp() - at).max(0) as f32) / 86_400.0;
    1.0 + RECENCY * 0.5f32.powf(days / HALF_LIFE_DAYS)
}

fn index_dir(store: &Store) -> PathBuf {
    store.recall_dir().join(INDEX_DIR)
}

/// The index, with every change to the store (`stamps`, whose digest is `store_digest`) since
/// it was last brought up to date.
fn fresh_index(
    store: &Store,
    stamps: &[(String, Stamp)],
    store_digest: u64,
    progress: &dyn Progress,
) -> Result<Index> {
    let dir = index_dir(store);
    // Another search may have brought it up to date meanwhile: then no lock is taken.
    if let Ok((index, digest)) = Index::open(&dir)
        && digest == store_digest
    {
        return Ok(index);
    }
    store.make_recall_dir()?;
    // One updater at a time; a second waits for the first (another search, never a turn),
    // then finds the index as the first left it.
    let _lock = store.lock(".recall", true, || {})?;
    directory::private_locks(&dir);
    let opened =
        Index::open(&dir).and_then(|(index, digest)| Ok((index, stamps::read(&dir, digest)?)));
    let (index, known) = match opened {
        Ok(opened) => opened,
        // None made yet. (One this user cannot look into is not taken for none: it is said.)
        Err(_) if matches!(dir.join("meta.json").try_exists(), Ok(false)) => Index::create(&dir)?,
        Err(e) if index::is_machine_fault(&e, &dir) => return Err(e),
        Err(e) => {
            note_rebuilding(progress, &dir, &e);
            Index::create(&dir)?
        }
    };
    // An update reads the index too (the terms of what it takes out): one that fails on
    // damage the opening did not see starts again from nothing, as a search that fails does.
    // (Any other failure, a full disk say, would fail a rebuild as well: it is said.)
    let updated =
        match index::contained("an update", || update(store, &dir, index, known, stamps, progress))
        {
            Err(e) if index::is_damage(&e) && !index::is_machine_fault(&e, &dir) => {
                note_rebuilding(progress, &dir, &e);
                let (index, known) = Index::create(&dir)?;
                update(store, &dir, index, known, stamps, progress)
            }
            updated => updated,
        };
    // What the hint names is in the index now. (A turn's hint left meanwhile is lost with it:
    // the next search then stats every session, and finds that change as any other.)
    if updated.is_ok() {
        store.remove_changed_hint();
    }
    updated
}

/// The sessions turns left word they changed ([`Store::hint_changed`]) after the index's last
/// commit, if they did: then a search of the index as it is would be thrown away.
fn hinted_change(store: &Store, dir: &std::path::Path) -> Option<Vec<String>> {
    let (ids, at) = store.changed_hint()?;
    (at > Index::committed_at(dir)?).then_some(ids)
}

/// What a search did with the sessions turns hinted at, while it stamped the store.
enum Hinted {
    /// Read from their files into an overlay, the index as it is beside it (no overlay when
    /// the index holds each as it is); `held` is what the index holds of them.
    Read { index: Box<Index>, overlay: Option<Overlay>, held: Held },
    /// Too many or too long to read at each search: brought into the index.
    Committed(Index),
}

/// The hinted sessions' stamps: those the index holds (`None` for one it does not) and those
/// their files had when read (`None` for one gone).
struct Held {
    ids: Vec<String>,
    indexed: Vec<Option<Stamp>>,
}

impl Held {
    /// The digest the store's stamps have if the only change since the index's last commit
    /// (whose digest is `digest`) is to these sessions: then the index with the overlay is
    /// the store.
    fn digest_with(&self, stamps: &Stamped, digest: u64) -> u64 {
        let now = |id: &str| stamps.get(id);
        let pairs = |stamp: &dyn Fn(usize) -> Option<Stamp>| {
            let pairs = self.ids.iter().enumerate();
            stamps::digest(pairs.filter_map(|(i, id)| Some((id.as_str(), stamp(i)?))))
        };
        let was = pairs(&|i| self.indexed[i]);
        let is = pairs(&|i| now(&self.ids[i]));
        digest.wrapping_sub(was).wrapping_add(is)
    }
}

/// Reads the sessions `ids` a turn hinted at into an overlay of the index, when they are few
/// and short enough to read at each search until the index's next commit; otherwise brings
/// them into the index, under the lock. `None` when neither could be done here (the search's
/// usual path then does it, and says what went wrong).
fn take_in_hinted(
    store: &Store,
    ids: &[String],
    warm: Option<&Warm>,
    progress: &dyn Progress,
) -> Option<Hinted> {
    let dir = index_dir(store);
    let (index, digest) = Index::open(&dir).ok()?;
    let indexed = stamps::held_of(&dir, digest, ids).ok()?;
    let now: Vec<Option<Stamp>> = ids.iter().map(|id| store.session_stamp(id)).collect();
    let changed: Vec<usize> = (0..ids.len()).filter(|&i| indexed[i] != now[i]).collect();
    let held = Held { ids: ids.to_vec(), indexed };
    if changed.is_empty() {
        return Some(Hinted::Read { index: Box::new(index), overlay: None, held });
    }
    let hidden: Vec<String> = changed.iter().map(|&i| ids[i].clone()).collect();
    // What the overlay is read from: the index's commit, and each session's stamp.
    let from: String = changed.iter().map(|&i| format!("{} {:?}\n", ids[i], now[i])).collect();
    let key = crate::store::fnv1a(&[&digest.to_le_bytes(), from.as_bytes()]);
    if let Some(overlay) = overlay_for(store, &index, &hidden, key, warm) {
        return Some(Hinted::Read { index: Box::new(index), overlay: Some(overlay), held });
    }
    let _lock = store.lock(".recall", true, || {}).ok()?;
    // Another search may have brought them in meanwhile.
    let (index, digest) = Index::open(&dir).ok()?;
    let known = stamps::read(&dir, digest).ok()?;
    directory::private_locks(&dir);
    let mut stale: Vec<(String, Option<Stamp>)> = ids
        .iter()
        .map(|id| (id.clone(), store.session_stamp(id)))
        .filter(|(id, stamp)| known.get(id).copied() != *stamp)
        .collect();
    read_unread_again(&mut stale, &index, |id| store.session_stamp(id));
    // On every core: the search's thread is kept on one while the store is stamped, and the
    // threads the update starts would be too.
    let update = || apply(store, &dir, index, known, &stale, progress);
    let index = crate::store::on_any_core(|| index::contained("an update", update)).ok()?;
    store.remove_changed_hint();
    Some(Hinted::Committed(index))
}

/// The overlay of sessions `hidden`, their files and the index as `key` (a digest of them)
/// says: the one a server kept from its last search, or the one kept in `recall/overlay` by the last search of any,
/// or else read now; `None` when they are too many or too long to read at each search, or one
/// is not a transcript (the commit that takes them in says so).
fn overlay_for(
    store: &Store,
    index: &Index,
    hidden: &[String],
    key: u64,
    warm: Option<&Warm>,
) -> Option<Overlay> {
    let mut kept = warm.map(|w| w.overlay.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some((kept_key, overlay)) = kept.as_deref().and_then(Option::as_ref)
        && *kept_key == key
    {
        return Some(overlay.clone());
    }
    let path = store.recall_dir().join(OVERLAY_FILE);
    let overlay = match Overlay::kept(&path, key, &index.schema()) {
        Some(overlay) => overlay,
        None => {
            let overlay = read_overlay(store, index, hidden)?;
            overlay.keep(&path, key);
            overlay
        }
    };
    if let Some(kept) = kept.as_deref_mut() {
        *kept = Some((key, overlay.clone()));
    }
    Some(overlay)
}

/// Sessions `hidden` read from their files into an overlay of `index`, when they are at most
/// [`OVERLAY_SESSIONS`] of at most [`OVERLAY_BYTES`], and each a transcript.
fn read_overlay(store: &Store, index: &Index, hidden: &[String]) -> Option<Overlay> {
    if hidden.len() > OVERLAY_SESSIONS {
        return None;
    }
    let mut read = Vec::new();
    let mut bytes = 0;
    for id in hidden {
        match store.read_session_bytes(id) {
            Ok(text) => {
                bytes += text.len();
                if bytes > OVERLAY_BYTES {
                    return None;
                }
                read.push((id.as_str(), exchanges::exchanges(&text).ok()?));
            }
            // Gone: its exchanges are hidden, and there are none to add.
            Err(e) if e.chain().any(is_not_found) => {}
            Err(_) => return None,
        }
    }
    let sessions: Vec<Session> =
        read.iter().map(|(id, (header, exchanges))| Session::of(id, header, exchanges)).collect();
    index.overlay(hidden, &sessions).ok()
}

/// Starts the index again from nothing, under the lock.
fn rebuild(stamper: &Stamper, why: &str, progress: &dyn Progress) -> Result<Index> {
    let store = stamper.store;
    let dir = index_dir(store);
    note_rebuilding(progress, &dir, &why);
    let _lock = store.lock(".recall", true, || {})?;
    let (index, known) = Index::create(&dir)?;
    update(store, &dir, index, known, &stamper.stamps()?, progress)
}

/// The one line a search says when the index in `dir` is rebuilt, and why.
fn note_rebuilding(progress: &dyn Progress, dir: &std::path::Path, why: &dyn std::fmt::Display) {
    progress.note(&format!(
        "recall: the index in {} cannot be used ({why:#}); rebuilding it from the transcripts",
        dir.display()
    ));
}

/// Sessions whose file is not what was indexed: new, changed (with their stamp now), or gone
/// (`None`). Both lists are walked once in the order of their ids: at 10,000 sessions, a
/// lookup of each in the other was milliseconds of the search after a turn.
fn stale(known: &Stamps, stamps: &[(String, Stamp)]) -> Vec<(String, Option<Stamp>)> {
    let mut now: Vec<(&str, Stamp)> = stamps.iter().map(|(id, s)| (id.as_str(), *s)).collect();
    now.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut stale = Vec::new();
    let (mut now, mut known) = (now.into_iter().peekable(), known.iter().peekable());
    loop {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let order = match (now.peek(), known.peek()) {
            (None, None) => return stale,
            (Some(_), None) => Less,
            (None, Some(_)) => Greater,
            (Some((id, _)), Some((known_id, _))) => (*id).cmp(known_id.as_str()),
        };
        match order {
            // New, or changed.
            Less | Equal => {
                let Some((id, stamp)) = now.next() else { return stale };
                let was = if order == Equal { known.next().map(|(_, s)| *s) } else { None };
                if was != Some(stamp) {
                    stale.push((id.to_string(), Some(stamp)));
                }
            }
            // Gone.
            Greater => {
                let Some((id, _)) = known.next() else { return stale };
                stale.push((id.clone(), None));
            }
        }
    }
}

/// Reads again each session that changed since `known` (the store's `stamps`, listed before
/// the lock was taken: a change made meanwhile is the next search's), and commits, under the
/// lock.
fn update(
    store: &Store,
    dir: &std::path::Path,
    index: Index,
    known: Stamps,
    stamps: &[(String, Stamp)],
    progress: &dyn Progress,
) -> Result<Index> {
    let mut stale = stale(&known, stamps);
    // One gone is among the stale already (the last commit holds its stamp).
    read_unread_again(&mut stale, &index, |id| {
        stamps.iter().find(|(s, _)| s == id).map(|(_, stamp)| *stamp)
    });
    apply(store, dir, index, known, &stale, progress)
}

/// Adds to `stale` the sessions the last commit could not read, with their stamps now
/// (`stamp_now`): a newer cca may read what an older one could not, and their files' stamps
/// alone would keep them unread until they change.
fn read_unread_again(
    stale: &mut Vec<(String, Option<Stamp>)>,
    index: &Index,
    stamp_now: impl Fn(&str) -> Option<Stamp>,
) {
    for (id, _) in index.unread() {
        if !stale.iter().any(|(s, _)| s == id) {
            stale.push((id.clone(), stamp_now(id)));
        }
    }
}

/// Reads again each of the `stale` sessions (with their stamp now, `None` for one gone) and
/// commits, under the lock.
fn apply(
    store: &Store,
    dir: &std::path::Path,
    mut index: Index,
    mut known: Stamps,
    stale: &[(String, Option<Stamp>)],
    progress: &dyn Progress,
) -> Result<Index> {
    if stale.is_empty() {
        return Ok(index);
    }
    let mut writer = index.writer(stale.len())?;
    let shown = stale.len() >= PROGRESS_FROM;
    // What could not be read stays so until its session changes (or goes).
    let mut unread: BTreeMap<String, String> = index.unread().iter().cloned().collect();
    for (done, chunk) in stale.chunks(COMMIT_EVERY).enumerate() {
        let newly = read_sessions(store, &index, &writer, chunk, &mut known, |n| {
            if shown {
                progress.reading(done * COMMIT_EVERY + n, stale.len());
            }
        })?;
        chunk.iter().for_each(|(id, _)| drop(unread.remove(id)));
        unread.extend(newly);
        index.commit(&mut writer, dir, &known, unread.clone().into_iter().collect())?;
    }
    writer.wait_merging_threads()?;
    if stale.len() >= MERGE_FROM {
        index.merge_all()?;
    }
    if shown {
        progress.finished();
    }
    Ok(index)
}

/// Says which sessions could not be read (a hand edit into another encoding, a file cut
/// short, one not readable by this user): they are not searched until mended, and a search
/// that finds nothing should not pass for a store that holds nothing. Said by every search,
/// from what the index's last commit holds.
fn note_unread(progress: &dyn Progress, unread: &[(String, String)]) {
    const NAMED: usize = 5;
    for (id, why) in unread.iter().take(NAMED) {
        progress.note(&format!(
            "recall: session {id} cannot be read ({why}), so it is not searched; look at it with `cca show --raw {id}` or `cca doctor`"
        ));
    }
    if unread.len() > NAMED {
        progress.note(&format!(
            "recall: {} more sessions cannot be read; `cca doctor` lists them",
            unread.len() - NAMED
        ));
    }
}

/// Takes each of `sessions` out of the index and, if it is still a session (it has a stamp),
/// puts its exchanges back in as its file now holds them; the stamp recorded is the one taken
/// before the read, so a file that changes meanwhile is read again next time.
fn read_sessions(
    store: &Store,
    index: &Index,
    writer: &tantivy::IndexWriter,
    sessions: &[(String, Option<Stamp>)],
    known: &mut Stamps,
    on_read: impl Fn(usize) + Sync,
) -> Result<Vec<(String, String)>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let read: std::sync::Mutex<Vec<(String, Option<Stamp>)>> = Default::default();
    let unread: std::sync::Mutex<Vec<(String, String)>> = Default::default();
    let failed: std::sync::Mutex<Option<anyhow::Error>> = Default::default();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
    std::thread::scope(|scope| {
        for _ in 0..threads.min(sessions.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((id, stamp)) = sessions.get(i) else { return };
                    index.remove(writer, id);
                    let added = match stamp {
                        Some(_) => add_session(store, index, writer, id),
                        None => Ok(None),
                    };
                    match added {
                        Ok(None) => {}
                        Ok(Some(why)) => {
                            let mut unread = unread.lock().unwrap_or_else(|e| e.into_inner());
                            unread.push((id.clone(), why));
                        }
                        Err(e) => {
                            *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                            return;
                        }
                    }
                    let mut read = read.lock().unwrap_or_else(|e| e.into_inner());
                    read.push((id.clone(), *stamp));
                    on_read(read.len());
                }
            });
        }
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    for (id, stamp) in read.into_inner().unwrap_or_else(|e| e.into_inner()) {
        match stamp {
            Some(stamp) => known.insert(id, stamp),
            None => known.remove(&id),
        };
    }
    Ok(unread.into_inner().unwrap_or_else(|e| e.into_inner()))
}

/// One session's exchanges into the index. A file that is not a transcript, or cannot be
/// read, has none (`Some` says why): it is recorded with its stamp all the same, so it is not
/// read at every search. One that went away meanwhile is not said.
fn add_session(
    store: &Store,
    index: &Index,
    writer: &tantivy::IndexWriter,
    id: &str,
) -> Result<Option<String>> {
    let bytes = match store.read_session_bytes(id) {
        Ok(bytes) => bytes,
        // Gone since it was stamped; a link that leads nowhere is there, and cannot be read.
        Err(e) if e.chain().any(is_not_found) && store.session_stamp(id).is_none() => {
            return Ok(None);
        }
        Err(e) => return Ok(Some(format!("{e:#}"))),
    };
    let (header, exchanges) = match exchanges::exchanges(&bytes) {
        Ok(read) => read,
        Err(e) => return Ok(Some(format!("{e:#}"))),
    };
    index.add(writer, &Session::of(id, &header, &exchanges))?;
    Ok(None)
}

fn is_not_found(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(session: &str, score: f32, about: &str) -> (f32, index::Hit) {
        let meaning = meaning::of_text(about);
        let hit = index::Hit {
            session: session.into(),
            number: 1,
            at: None,
            score,
            session_score: 0.0,
            meaning,
            session_meaning: meaning,
        };
        (score, hit)
    }

    fn weighed(question: &str, hits: Vec<(f32, index::Hit)>) -> Vec<(String, f32)> {
        let mut hits = hits;
        weigh_meaning(&mut hits, &question::parse(question));
        hits.into_iter().map(|(score, hit)| (hit.session, score)).collect()
    }

    #[test]
    fn closeness_in_meaning_weighs_candidates_but_a_word_the_table_lacks_keeps_its_weight() {
        let candidates = || {
            vec![
                hit("fruit", 10.0, "apple banana pear fruit salad"),
                hit("database", 10.0, "mysql database tables and queries"),
                hit("weather", 9.0, "rain and snow and wind today"),
            ]
        };
        // The same score by words: the one about what the question means comes first.
        let found = weighed("which sql server did we pick", candidates());
        let score = |id: &str| found.iter().find(|(s, _)| s == id).unwrap().1;
        assert!(score("database") > score("fruit"), "{found:?}");
        // Scores are shares of the best by words, whatever the question.
        let words_only = weighed("zzqxv", candidates());
        assert_eq!(
            words_only,
            [("fruit".into(), 1.0), ("database".into(), 1.0), ("weather".into(), 0.9)]
        );
        // A third of the question's words an identifier the table lacks: closeness counts for
        // the other two thirds.
        let whole = weighed("sql server", candidates());
        let half = weighed("zzqxv sql server", candidates());
        let lift = |found: &[(String, f32)]| {
            let score = |id: &str| found.iter().find(|(s, _)| s == id).unwrap().1;
            score("database") - score("fruit")
        };
        assert!((lift(&half) - lift(&whole) * 2.0 / 3.0).abs() < 1e-3, "{half:?} {whole:?}");
    }

    #[test]
    fn stale_sessions_are_the_new_the_changed_and_the_gone() {
        let known: Stamps =
            [("b", 2), ("c", 3), ("e", 5), ("g", 7)].map(|(id, s)| (id.to_string(), s)).into();
        // The store's stamps come in the order the folder lists them.
        let stamps: Vec<(String, Stamp)> = [("f", 6), ("c", 30), ("a", 1), ("b", 2), ("h", 8)]
            .map(|(id, s)| (id.to_string(), s))
            .into();
        let mut found = stale(&known, &stamps);
        found.sort();
        let want = [
            ("a", Some(1)),
            ("c", Some(30)),
            ("e", None),
            ("f", Some(6)),
            ("g", None),
            ("h", Some(8)),
        ]
        .map(|(id, s)| (id.to_string(), s));
        assert_eq!(found, want);
        assert_eq!(stale(&known, &[]).len(), 4);
        assert_eq!(stale(&Stamps::new(), &stamps).len(), 5);
        let same: Vec<(String, Stamp)> = known.iter().map(|(id, s)| (id.clone(), *s)).collect();
        assert!(stale(&known, &same).is_empty());
    }
}
