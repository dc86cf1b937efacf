//! The index itself: tantivy, in `$CCA_HOME/recall/index/`. Every file effect of recall but
//! the folder and the lock (`store`) is here, through tantivy's directory (`directory`, which
//! writes without flushing), whose commits are atomic (a new `meta.json` renamed into place;
//! segments are never changed once written).
//!
//! What the index holds of each session, its file's stamp when it was read, is kept in a
//! stamps file written just after each commit, whose digest the commit's payload holds beside
//! the format version: a search compares the store's stamps with that digest alone, and a
//! stamps file that is not the last commit's (a crash between the two writes) is not trusted.

use std::ops::Bound;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};
use tantivy::directory::RamDirectory;
use tantivy::directory::error::{LockError, OpenDirectoryError, OpenReadError, OpenWriteError};
use tantivy::query::{
    Bm25StatisticsProvider, BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query,
    RangeQuery, TermQuery,
};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions, Value,
};
use tantivy::{DocAddress, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use super::analysis::{analyzer, word_analyzer};
use super::context;
use super::directory::Unflushed;
use super::exchanges::Exchange;
use super::facet::Facet;
use super::meaning::{self, Vector};
use super::overlay::{Overlay, Together};
use super::phrases::{self, Asked};
use super::question::Question;
use super::sessions::{self, SessionFields};
use super::stamps::{self, Stamps, stamps_path};
use crate::transcript::Header;

/// The index's layout and analysis; an index of another is rebuilt (with a note).
pub(crate) const VERSION: u32 = 11;
const ANALYZER: &str = "cca_english";
/// Memory for the writer's buffers, per thread (tantivy's least is 15 MB).
const WRITER_HEAP: usize = 48 << 20;
/// tantivy's least memory per thread (15 MB; not exported).
const LEAST_HEAP: usize = 15_000_000;
/// Memory for an overlay's writer ([`Index::overlay`]): it sizes the term table, zeroed
/// before the first word (a table grows as it must), and a few short sessions need little.
const OVERLAY_HEAP: usize = 1 << 20;
/// Fewer sessions to read again than this take one thread and the least memory.
const FEW_SESSIONS: usize = 200;

/// Field weights: a word in a question or a title says more about what the exchange is about
/// than the same word somewhere in a long answer.
const QUESTION_BOOST: f32 = 1.5;
const ANSWER_BOOST: f32 = 1.0;
const TITLE_BOOST: f32 = 1.0;
/// The question before, scored for the candidates found ([`super::context`]).
const CONTEXT_BOOST: f32 = 0.5;
/// A word that often means what a word of the question means ([`Question::related`]) counts
/// this much of what the word itself would.
const RELATED_WEIGHT: f32 = 0.5;
/// A quoted phrase found as written counts this much beside its words.
const PHRASE_BOOST: f32 = 2.0;

#[derive(Clone, Copy)]
struct Fields {
    question: Field,
    answer: Field,
    /// The session's title and name.
    title: Field,
    /// The question of the exchange before.
    context: Field,
    /// What is counted and filtered on, a term each ([`Facet`]). One field for all: each
    /// field indexed costs a segment's writing some 0.3 ms however little it holds, which a
    /// search after a turn pays for the sessions it reads beside the index.
    facets: Field,
    session: Field,
    number: Field,
    /// Seconds since the epoch; absent when the transcript gives no time. Not indexed: a
    /// range of times is looked up in the fast field.
    at: Field,
    /// What the exchange is about, and its session, as vectors ([`super::meaning`]).
    meaning: Field,
    session_meaning: Field,
}

/// Each update adds a segment of the sessions it read again. Eight segments of about one size
/// are merged into one, with sizes on a scale that starts small (tantivy's starts at 10,000
/// documents, so each update would rewrite every small segment there is). A segment over 1,000
/// documents (a build's, or one such merge made) is never merged again: a search after a turn
/// waits for the merges its update started, and eight of a build's segments merged into one
/// (allowed at 20,000) took that search 2 s on the benchmark's store.
fn merge_policy() -> tantivy::indexer::LogMergePolicy {
    let mut policy = tantivy::indexer::LogMergePolicy::default();
    policy.set_min_layer_size(100);
    policy.set_max_docs_before_merge(1_000);
    policy
}

/// Stored fields in blocks of 2 KB, not tantivy's 16: a search reads the stored fields of its
/// 200 candidates, each in a block of its own that is decompressed whole, which with 16 KB
/// blocks was some 4 ms of a search's CPU. The stored fields take 13% more room (0.6% of the
/// index).
fn settings() -> tantivy::IndexSettings {
    tantivy::IndexSettings { docstore_blocksize: 2048, ..Default::default() }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = |record| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default().set_tokenizer(ANALYZER).set_index_option(record),
        )
    };
    // Positions only where a quoted phrase is looked for.
    let (phrases, words) = (IndexRecordOption::WithFreqsAndPositions, IndexRecordOption::WithFreqs);
    let fields = Fields {
        question: b.add_text_field("question", text(phrases)),
        answer: b.add_text_field("answer", text(phrases)),
        title: b.add_text_field("title", text(words)),
        context: b.add_text_field("context", text(words)),
        facets: b.add_text_field("facets", STRING),
        session: b.add_text_field("session", STRING | STORED),
        number: b.add_u64_field("exchange", STORED),
        at: b.add_i64_field("at", FAST | STORED),
        meaning: b.add_bytes_field("meaning", STORED),
        session_meaning: b.add_bytes_field("session_meaning", STORED),
    };
    (b.build(), fields)
}

/// Runs `f`, a reading of the index (a search, or an update, which reads it too), with a panic
/// inside it made an error: tantivy checks no sums, and a segment damaged in a way its reader
/// does not look for (random bytes in a term dictionary) panics in its FST. The error makes the
/// index rebuilt, as any other that cannot be read; the panic is not printed.
pub(crate) fn contained<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // How many readings run; meanwhile no panic is printed, on any thread: tantivy's own
    // (an update's writer and merger) read the same damaged files.
    static QUIET: AtomicUsize = AtomicUsize::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let earlier = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.load(Ordering::SeqCst) == 0 {
                earlier(info);
            }
        }));
    });
    QUIET.fetch_add(1, Ordering::SeqCst);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.fetch_sub(1, Ordering::SeqCst);
    result.unwrap_or_else(|_| Err(Damaged(format!("{what} failed inside the index")).into()))
}

/// Whether a failure of the index's own says it is damaged (a panic [`contained`] caught, data
/// that does not read, a thread of tantivy's that died) rather than that the disk is full,
/// read-only or not ours: the one is mended by a rebuild, the other would fail it as well.
/// tantivy reports much damage as I/O errors (a term dictionary that is not one), so every
/// failure of its counts but those the machine causes.
pub(crate) fn is_damage(e: &anyhow::Error) -> bool {
    use std::io::ErrorKind as K;
    use tantivy::TantivyError as T;
    e.chain().any(|c| {
        c.is::<Damaged>()
            || c.downcast_ref::<T>().is_some_and(|t| match t {
                T::IoError(io) => !matches!(
                    io.kind(),
                    K::StorageFull
                        | K::QuotaExceeded
                        | K::FileTooLarge
                        | K::ReadOnlyFilesystem
                        | K::PermissionDenied
                        | K::OutOfMemory
                        | K::WriteZero
                        | K::Interrupted
                ),
                T::OpenWriteError(_) | T::OpenDirectoryError(_) | T::LockFailure(..) => false,
                _ => true,
            })
    })
}

/// Whether a failure of the index comes from the machine, not from its files: a full disk, a
/// file-size limit, or a folder this user may not write. Then it is searched as it is, with a
/// note; rebuilt, it would fail the same way, and lose what it held. tantivy's writer threads
/// report a full disk as a thread that died, or an internal error: those count when the disk has
/// almost no room left (an index of another version, or whose files do not read, is still
/// rebuilt).
pub(crate) fn is_machine_fault(e: &anyhow::Error, dir: &Path) -> bool {
    use std::io::ErrorKind as K;
    let io_fault = |io: &std::io::Error| {
        is_forbidden(io) || matches!(io.kind(), K::StorageFull | K::QuotaExceeded | K::FileTooLarge)
    };
    let said = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(io_fault)
            || match c.downcast_ref::<tantivy::TantivyError>() {
                Some(tantivy::TantivyError::IoError(io)) => io_fault(io),
                Some(tantivy::TantivyError::LockFailure(LockError::IoError(io), _)) => io_fault(io),
                Some(tantivy::TantivyError::OpenReadError(OpenReadError::IoError {
                    io_error,
                    ..
                })) => io_fault(io_error),
                Some(tantivy::TantivyError::OpenWriteError(OpenWriteError::IoError {
                    io_error,
                    ..
                })) => io_fault(io_error),
                Some(tantivy::TantivyError::OpenDirectoryError(OpenDirectoryError::IoError {
                    io_error,
                    ..
                })) => io_fault(io_error),
                _ => false,
            }
    });
    let unexplained = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<tantivy::TantivyError>(),
            Some(tantivy::TantivyError::ErrorInThread(_) | tantivy::TantivyError::InternalError(_))
        )
    });
    said || (unexplained && almost_full(dir))
}

/// Whether the disk that holds `dir` (or the nearest folder above it that there is) has less
/// than [`LEAST_ROOM`] left for this user.
fn almost_full(dir: &Path) -> bool {
    let Some(there) = dir.ancestors().find(|d| d.exists()) else { return false };
    rustix::fs::statvfs(there).is_ok_and(|s| s.f_bavail.saturating_mul(s.f_frsize) < LEAST_ROOM)
}

/// Room on the disk below which a failed update is taken for a full disk.
const LEAST_ROOM: u64 = 64 << 20;

/// Whether an I/O error says this user may not write there.
pub(crate) fn is_forbidden(io: &std::io::Error) -> bool {
    use std::io::ErrorKind as K;
    matches!(io.kind(), K::PermissionDenied | K::ReadOnlyFilesystem)
}

/// What [`contained`] makes of a panic: the index is damaged, and is rebuilt.
#[derive(Debug)]
pub(crate) struct Damaged(String);

impl std::fmt::Display for Damaged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: it is damaged", self.0)
    }
}

impl std::error::Error for Damaged {}

/// What a commit says of itself: the format, and the digest of the stamps it holds
/// ([`stamps::digest`]), so that a search that finds the store's stamps the same reads nothing
/// else.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Head {
    version: u32,
    digest: u64,
    /// The sessions that could not be read (id, why): not in the index, said at each search.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    unread: Vec<(String, String)>,
}

/// A session as it is indexed: what is asked of its header, and its exchanges.
pub(crate) struct Session<'a> {
    pub id: &'a str,
    pub title: &'a str,
    pub name: Option<&'a str>,
    pub engine: &'a str,
    pub folder: &'a str,
    /// When the session started: the time of an exchange the transcript gives none, as
    /// `cca grep` takes it.
    pub created: &'a str,
    pub exchanges: &'a [Exchange],
}

impl<'a> Session<'a> {
    /// Session `id` as its file holds it.
    pub(crate) fn of(id: &'a str, header: &'a Header, exchanges: &'a [Exchange]) -> Session<'a> {
        Session {
            id,
            title: &header.title,
            name: header.name.as_deref(),
            engine: &header.engine,
            folder: &header.cwd,
            created: &header.created,
            exchanges,
        }
    }
}

/// Which exchanges a search may find.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filter {
    /// Sessions started in this folder or below it.
    pub folder: Option<PathBuf>,
    pub engine: Option<String>,
    /// Seconds since the epoch, both ends included.
    pub since: Option<i64>,
    pub until: Option<i64>,
}

/// An exchange found, by its BM25 score.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub session: String,
    pub number: u64,
    pub at: Option<i64>,
    pub score: f32,
    /// Its session's BM25 score as one document (title, name, every exchange), computed from
    /// the exchanges ([`super::sessions`]).
    pub session_score: f32,
    /// What the exchange and its session are about ([`super::meaning`]), when their words say.
    pub meaning: Option<Vector>,
    pub session_meaning: Option<Vector>,
}

/// An open index.
pub(crate) struct Index {
    index: tantivy::Index,
    fields: Fields,
    /// What the last commit says could not be read (its [`Head`]'s).
    unread: Vec<(String, String)>,
    /// The digest of the stamps the last commit holds.
    digest: u64,
}

impl Index {
    /// Opens the index in `dir`, checking that it is one this cca wrote; `Err` says why not.
    /// With it, the digest of the stamps its last commit holds.
    pub(crate) fn open(dir: &Path) -> Result<(Index, u64)> {
        contained("opening it", || Index::open_unguarded(dir))
    }

    fn open_unguarded(dir: &Path) -> Result<(Index, u64)> {
        let index = tantivy::Index::open(Unflushed::open(dir)?)?;
        let (schema, fields) = schema();
        if index.schema() != schema {
            return Err(anyhow!("it was built by another version of cca"));
        }
        let head = index.load_metas()?.payload.unwrap_or_default();
        let head: Head = serde_json::from_str(&head)
            .map_err(|_| anyhow!("it was built by another version of cca"))?;
        if head.version != VERSION {
            return Err(anyhow!("it was built by another version of cca"));
        }
        index.tokenizers().register(ANALYZER, analyzer());
        Ok((Index { index, fields, unread: head.unread, digest: head.digest }, head.digest))
    }

    /// Its layout.
    pub(crate) fn schema(&self) -> tantivy::schema::Schema {
        self.index.schema()
    }

    /// The digest of the stamps its last commit holds ([`stamps::digest`]).
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// When the index in `dir` was last committed (its `meta.json` written), if it was.
    pub(crate) fn committed_at(dir: &Path) -> Option<std::time::SystemTime> {
        std::fs::metadata(dir.join("meta.json")).and_then(|m| m.modified()).ok()
    }

    /// Makes a new, empty index in `dir`, in place of whatever was there, committed so that it
    /// opens. Called under the update lock.
    pub(crate) fn create(dir: &Path) -> Result<(Index, Stamps)> {
        // Anything there goes, a file put where the folder should be included: it is a cache.
        let is_dir = std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir());
        let removed = if is_dir { std::fs::remove_dir_all(dir) } else { std::fs::remove_file(dir) };
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", dir.display()));
            }
            _ => {}
        }
        crate::store::make_private_dir(dir)?;
        super::directory::private_locks(dir);
        // Where the index's version 4 kept its stamps, as JSON.
        let _ = std::fs::remove_file(dir.with_extension("stamps.json"));
        // A folder where the stamps go could never be written over: every commit would fail.
        if std::fs::symlink_metadata(stamps_path(dir)).is_ok_and(|m| m.is_dir()) {
            std::fs::remove_dir_all(stamps_path(dir))
                .with_context(|| format!("cannot remove {}", stamps_path(dir).display()))?;
        }
        let (schema, fields) = schema();
        let index = Unflushed::open(dir)
            .map_err(tantivy::TantivyError::from)
            .and_then(|d| tantivy::Index::create(d, schema, settings()))
            .with_context(|| format!("cannot create an index in {}", dir.display()))?;
        index.tokenizers().register(ANALYZER, analyzer());
        let mut index = Index { index, fields, unread: Vec::new(), digest: 0 };
        let stamps = Stamps::new();
        let mut writer = index.writer(0)?;
        index.commit(&mut writer, dir, &stamps, Vec::new())?;
        Ok((index, stamps))
    }

    /// A writer for reading `sessions` sessions again: for a few (the usual case, a turn or
    /// two since the last search) one thread with the least memory tantivy allows, since its
    /// buffers are zeroed before the first word is added and that is most of what a new
    /// exchange costs the next search; for a build, a thread per core (up to four).
    pub(crate) fn writer(&self, sessions: usize) -> Result<IndexWriter> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4);
        let (threads, heap) = match sessions {
            0..FEW_SESSIONS => (1, LEAST_HEAP),
            _ => (cores, cores * WRITER_HEAP),
        };
        // One merging thread, not tantivy's four: an update after a turn merges at most a few
        // small segments, and each thread is started whether or not it merges.
        let options = tantivy::indexer::IndexWriterOptions::builder()
            .num_worker_threads(threads)
            .memory_budget_per_thread(heap / threads)
            .num_merge_threads(1)
            .build();
        let writer = self.index.writer_with_options(options).map_err(|e| match e {
            // tantivy's own words blame another writer, whatever the cause.
            tantivy::TantivyError::LockFailure(LockError::IoError(io), _) => {
                anyhow::Error::new(std::io::Error::new(io.kind(), io.to_string()))
                    .context("cannot lock the index to write it")
            }
            e => e.into(),
        })?;
        writer.set_merge_policy(Box::new(merge_policy()));
        Ok(writer)
    }

    /// Merges every segment into one, keeping the last commit's payload (tantivy publishes a
    /// merge with it). Called under the update lock.
    pub(crate) fn merge_all(&self) -> Result<()> {
        let segments = self.index.searchable_segment_ids()?;
        if segments.len() < 2 {
            return Ok(());
        }
        let mut writer = self.writer(0)?;
        writer.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        writer.merge(&segments).wait()?;
        writer.wait_merging_threads()?;
        Ok(())
    }

    /// Takes a session out of the index (all its exchanges), in the writer's next commit.
    pub(crate) fn remove(&self, writer: &IndexWriter, id: &str) {
        writer.delete_term(Term::from_field_text(self.fields.session, id));
    }

    /// Adds a session's exchanges, in the writer's next commit.
    pub(crate) fn add(&self, writer: &IndexWriter, session: &Session) -> Result<()> {
        for doc in self.documents(session) {
            writer.add_document(doc)?;
        }
        Ok(())
    }

    /// A session's exchanges as the index holds them, a document each.
    fn documents(&self, session: &Session) -> Vec<TantivyDocument> {
        let f = self.fields;
        let about = match session.name {
            Some(name) => format!("{} {name}", session.title),
            None => session.title.to_string(),
        };
        let meanings: Vec<Option<Vector>> = session
            .exchanges
            .iter()
            .map(|e| meaning::of_text(&format!("{}\n{}", e.question, e.answer)))
            .collect();
        let session_meaning =
            meaning::mean(meanings.iter().flatten()).map(|v| meaning::to_bytes(&v));
        let mut before: Option<&str> = None;
        let mut docs = Vec::with_capacity(session.exchanges.len());
        for (i, (exchange, meant)) in session.exchanges.iter().zip(&meanings).enumerate() {
            let mut doc = TantivyDocument::default();
            if i == 0 {
                doc.add_text(f.facets, Facet::First.text());
            }
            doc.add_text(f.question, &exchange.question);
            if let Some(before) = before.filter(|b| *b != exchange.question) {
                doc.add_text(f.context, before);
            }
            before = Some(&exchange.question);
            doc.add_text(f.answer, &exchange.answer);
            doc.add_text(f.title, &about);
            doc.add_text(f.session, session.id);
            doc.add_u64(f.number, exchange.number);
            if let Some(at) = exchange.at.as_deref().or(Some(session.created)).and_then(seconds) {
                doc.add_i64(f.at, at);
            }
            if let Some(meant) = meant {
                doc.add_bytes(f.meaning, &meaning::to_bytes(meant));
            }
            if let Some(meant) = &session_meaning {
                doc.add_bytes(f.session_meaning, meant);
            }
            doc.add_text(f.facets, Facet::Engine(session.engine).text());
            for folder in Path::new(session.folder).ancestors() {
                doc.add_text(f.facets, Facet::Folder(&folder.to_string_lossy()).text());
            }
            docs.push(doc);
        }
        docs
    }

    /// `sessions` as their files hold them now, indexed in memory, to be searched beside the
    /// index in place of what it holds of `ids` (those sessions, and any gone since).
    pub(crate) fn overlay(&self, ids: &[String], sessions: &[Session]) -> Result<Overlay> {
        let builder = tantivy::IndexBuilder::new()
            .schema(self.index.schema())
            .tokenizers(self.index.tokenizers().clone());
        let mut writer =
            builder.single_segment_index_writer(RamDirectory::create(), OVERLAY_HEAP)?;
        for doc in sessions.iter().flat_map(|session| self.documents(session)) {
            writer.add_document(doc)?;
        }
        Ok(Overlay { index: writer.finalize()?, ids: ids.to_vec() })
    }

    /// The sessions the last commit says could not be read, with why.
    pub(crate) fn unread(&self) -> &[(String, String)] {
        &self.unread
    }

    /// Makes what the writer holds the index, with the digest of `stamps` and the sessions
    /// that could not be read (`unread`), in one atomic step; then writes the stamps file
    /// beside it (`dir` is the index's folder).
    pub(crate) fn commit(
        &mut self,
        writer: &mut IndexWriter,
        dir: &Path,
        stamps: &Stamps,
        unread: Vec<(String, String)>,
    ) -> Result<()> {
        let digest = stamps::digest(stamps.iter().map(|(id, s)| (id.as_str(), *s)));
        let mut commit = writer.prepare_commit()?;
        let head = Head { version: VERSION, digest, unread };
        commit.set_payload(&serde_json::to_string(&head)?);
        commit.commit()?;
        self.unread = head.unread;
        self.digest = digest;
        // Not flushed, as tantivy's files are not: a file a system crash cut short does not
        // have the digest it names, and the index is rebuilt.
        stamps::write(dir, digest, stamps)
    }

    /// The `limit` best exchanges for `question` among those `filter` lets through, each with
    /// its session's score as one document; with `overlay`, its sessions as it holds them in
    /// place of the index's.
    pub(crate) fn search(
        &self,
        question: &Question,
        filter: &Filter,
        limit: usize,
        overlay: Option<&Overlay>,
    ) -> Result<Vec<Hit>> {
        contained("a search", || self.search_unguarded(question, filter, limit, overlay))
    }

    fn search_unguarded(
        &self,
        question: &Question,
        filter: &Filter,
        limit: usize,
        overlay: Option<&Overlay>,
    ) -> Result<Vec<Hit>> {
        let f = self.fields;
        let fields =
            [(f.question, QUESTION_BOOST), (f.answer, ANSWER_BOOST), (f.title, TITLE_BOOST)];
        let Some(asked) = self.query(question, &fields, filter) else {
            return Ok(Vec::new());
        };
        // Read once, by this process: no watching for later commits.
        let searcher_of = |index: &tantivy::Index| -> Result<Searcher> {
            let reader: tantivy::IndexReader =
                index.reader_builder().reload_policy(ReloadPolicy::Manual).try_into()?;
            Ok(reader.searcher())
        };
        // The index, hiding the overlay's sessions; then the overlay.
        let mut searched = vec![(searcher_of(&self.index)?, Vec::new())];
        if let Some(overlay) = overlay {
            searched[0].1 = overlay.ids.clone();
            searched.push((searcher_of(&overlay.index)?, Vec::new()));
        }
        let searchers: Vec<&Searcher> = searched.iter().map(|(s, _)| s).collect();
        let together = Together(&searchers);
        // No more than there are: a limit from outside (`-n`) sizes tantivy's buffers.
        let docs: u64 = searchers.iter().map(|s| s.num_docs()).sum();
        let limit = limit.min(usize::try_from(docs).unwrap_or(usize::MAX)).max(1);
        let mut top: Vec<(f32, usize, DocAddress)> = Vec::new();
        for (i, (searcher, hidden)) in searched.iter().enumerate() {
            // Hidden exchanges are passed over as they are met, so as many more are asked
            // for. (Excluding them in the query would keep tantivy from skipping the
            // exchanges that cannot make the top: many times slower.)
            let mut more = 0;
            for id in hidden {
                more += searcher.doc_freq(&Term::from_field_text(f.session, id))?;
            }
            let more = usize::try_from(more).unwrap_or(usize::MAX);
            let found = phrases::best(searcher, &asked, limit.saturating_add(more), &together)?;
            top.extend(found.into_iter().map(|(score, address)| (score, i, address)));
        }
        let weighed = self.weighed(question);
        context::add(&mut top, &searchers, &together, f.context, &weighed, CONTEXT_BOOST)?;
        top.sort_by(|a, b| b.0.total_cmp(&a.0));
        let mut hits = Vec::with_capacity(limit);
        for (score, i, address) in top {
            if hits.len() == limit {
                break;
            }
            let doc: TantivyDocument = searchers[i].doc(address)?;
            let session = doc.get_first(f.session).and_then(|v| v.as_str());
            let number = doc.get_first(f.number).and_then(|v| v.as_u64());
            let at = doc.get_first(f.at).and_then(|v| v.as_i64());
            let about = |field| {
                doc.get_first(field).and_then(|v| v.as_bytes()).and_then(meaning::from_bytes)
            };
            let hidden = |id: &str| searched[i].1.iter().any(|h| h == id);
            if let (Some(session), Some(number)) = (session, number)
                && !hidden(session)
            {
                hits.push(Hit {
                    session: session.to_string(),
                    number,
                    at,
                    score,
                    session_score: 0.0,
                    meaning: about(f.meaning),
                    session_meaning: about(f.session_meaning),
                });
            }
        }
        if hits.is_empty() {
            return Ok(hits);
        }
        // The sessions of the exchanges found, each scored as one document.
        let mut ids: Vec<&str> = hits.iter().map(|h| h.session.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        let sessions = together.doc_freq(&Facet::First.term(f.facets))?;
        let fields = SessionFields {
            question: f.question,
            answer: f.answer,
            title: f.title,
            session: f.session,
        };
        let each: Vec<(&Searcher, &[String])> =
            searched.iter().map(|(s, hidden)| (s, hidden.as_slice())).collect();
        let scores = sessions::scores(&each, fields, &weighed, &ids, sessions)?;
        for hit in &mut hits {
            hit.session_score = scores.get(&hit.session).copied().unwrap_or(0.0);
        }
        Ok(hits)
    }

    /// The question's words as the index holds them (stemmed, stop words out).
    fn terms(&self, words: &[String]) -> Vec<(usize, String)> {
        let mut analyzer = word_analyzer();
        let mut terms = Vec::new();
        // A word cut in pieces (text written without spaces) takes a position each, as in
        // the index: the words after it move on.
        let mut shift = 0;
        for (at, word) in words.iter().enumerate() {
            let mut stream = analyzer.token_stream(word);
            while let Some(token) = stream.next() {
                terms.push((at + shift + token.position, token.text.clone()));
            }
            // As the index's analysis does: a run's pairs, then a gap of one.
            if word.chars().any(super::analysis::is_cjk) {
                shift += super::analysis::pieces(word).len();
            }
        }
        terms
    }

    /// The question's words as the index holds them, each once, with its weight: 1, or
    /// [`RELATED_WEIGHT`] for a related word that is not one of them.
    fn weighed(&self, question: &Question) -> Vec<(String, f32)> {
        let stems = |words: &[String]| {
            let mut stems: Vec<String> = self.terms(words).into_iter().map(|(_, t)| t).collect();
            stems.sort();
            stems.dedup();
            stems
        };
        let words = stems(&question.words);
        let related: Vec<String> =
            stems(&question.related).into_iter().filter(|w| !words.contains(w)).collect();
        let related = related.into_iter().map(|w| (w, RELATED_WEIGHT));
        words.into_iter().map(|w| (w, 1.0)).chain(related).collect()
    }

    /// Any word may match (none is required); a word scores by field (`fields`, with their
    /// weights), a related word at [`RELATED_WEIGHT`], and a quoted phrase found as written
    /// scores again, apart ([`phrases`]).
    fn query(
        &self,
        question: &Question,
        fields: &[(Field, f32)],
        filter: &Filter,
    ) -> Option<Asked> {
        let f = self.fields;
        let mut any: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (word, weight) in self.weighed(question) {
            for &(field, boost) in fields {
                let term = TermQuery::new(
                    Term::from_field_text(field, &word),
                    IndexRecordOption::WithFreqs,
                );
                any.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(Box::new(term), boost * weight)),
                ));
            }
        }
        if any.is_empty() {
            return None;
        }
        // A phrase's words are words of the question: an exchange that holds it matches them.
        let mut phrases = Vec::new();
        for phrase in &question.phrases {
            let terms = self.terms(phrase);
            if terms.len() < 2 {
                continue;
            }
            for field in [f.question, f.answer] {
                let offsets =
                    terms.iter().map(|(at, t)| (*at, Term::from_field_text(field, t))).collect();
                phrases.push((PhraseQuery::new_with_offset(offsets), PHRASE_BOOST));
            }
        }
        let any: Box<dyn Query> = Box::new(BooleanQuery::new(any));
        // A filter lets through and scores nothing: a deeper folder (more folders above it
        // in the field) would otherwise score less, and a rarer engine more.
        let filtering = |q: Box<dyn Query>| -> (Occur, Box<dyn Query>) {
            (Occur::Must, Box::new(ConstScoreQuery::new(q, 0.0)))
        };
        let mut must: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        if let Some(folder) = &filter.folder {
            let term = Facet::Folder(&folder.to_string_lossy()).term(f.facets);
            must.push(filtering(Box::new(TermQuery::new(term, IndexRecordOption::Basic))));
        }
        if let Some(engine) = &filter.engine {
            let term = Facet::Engine(engine).term(f.facets);
            must.push(filtering(Box::new(TermQuery::new(term, IndexRecordOption::Basic))));
        }
        if filter.since.is_some() || filter.until.is_some() {
            let bound = |t: Option<i64>, low: bool| match t {
                Some(t) => Bound::Included(Term::from_field_i64(f.at, t)),
                None => Bound::Included(Term::from_field_i64(
                    f.at,
                    if low { i64::MIN } else { i64::MAX },
                )),
            };
            let range = RangeQuery::new(bound(filter.since, true), bound(filter.until, false));
            must.push(filtering(Box::new(range)));
        }
        let words = if must.is_empty() {
            any
        } else {
            must.push((Occur::Must, any));
            Box::new(BooleanQuery::new(must))
        };
        Some(Asked { words, phrases })
    }
}

/// An RFC 3339 time as seconds since the epoch.
pub(crate) fn seconds(at: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(at).ok().map(|t| t.timestamp())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    pub(in super::super) fn exchange(number: u64, question: &str, answer: &str) -> Exchange {
        Exchange {
            number,
            at: None,
            question: question.into(),
            answer: answer.into(),
            answered: true,
            span: 0..0,
        }
    }

    /// An index in a new folder holding `sessions` (id, title, exchanges), committed; the
    /// folder goes with the `TempDir`.
    pub(in super::super) fn index_of(
        sessions: &[(&str, &str, &[Exchange])],
    ) -> (tempfile::TempDir, Index) {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("index");
        let (mut index, stamps) = Index::create(&dir).unwrap();
        let mut writer = index.writer(0).unwrap();
        for &(id, title, exchanges) in sessions {
            let session = Session {
                id,
                title,
                name: None,
                engine: "claude",
                folder: "/w",
                created: "",
                exchanges,
            };
            index.add(&writer, &session).unwrap();
        }
        index.commit(&mut writer, &dir, &stamps, Vec::new()).unwrap();
        (temp, index)
    }

    pub(in super::super) fn search(index: &Index, question: &str, limit: usize) -> Vec<Hit> {
        index
            .search(&super::super::question::parse(question), &Filter::default(), limit, None)
            .unwrap()
    }

    /// Sessions read into an overlay are found as a commit of them would find them, scores
    /// and all; what the index held of them is not found.
    #[test]
    fn an_overlay_finds_what_a_commit_of_its_sessions_would() {
        let [a, b, b2, c] = [
            ["salmon", "tides"],
            ["trout", "rivers"],
            ["trout", "lakes"],
            ["salmon trout", "rain"],
        ]
        .map(|[q, a]| vec![exchange(1, &format!("where do {q} live?"), a)]);
        let session = |id, exchanges| Session {
            id,
            title: "",
            name: None,
            engine: "claude",
            folder: "/w",
            created: "",
            exchanges,
        };
        let (_before, before) = index_of(&[("a", "", &a), ("b", "", &b)]);
        // The commit: b taken out and put back as it is now, c added.
        let (temp, mut after) = index_of(&[("a", "", &a), ("b", "", &b)]);
        let mut writer = after.writer(0).unwrap();
        after.remove(&writer, "b");
        after.add(&writer, &session("b", &b2)).unwrap();
        after.add(&writer, &session("c", &c)).unwrap();
        after.commit(&mut writer, &temp.path().join("index"), &Stamps::new(), Vec::new()).unwrap();
        let ids = ["b".to_string(), "c".to_string()];
        let overlay = before.overlay(&ids, &[session("b", &b2), session("c", &c)]).unwrap();
        for question in ["where do trout live", "salmon rivers lakes rain", "trout"] {
            let question = super::super::question::parse(question);
            let found = |index: &Index, overlay| {
                let hits = index.search(&question, &Filter::default(), 10, overlay).unwrap();
                let mut hits: Vec<_> =
                    hits.into_iter().map(|h| (h.session, h.score, h.session_score)).collect();
                hits.sort_by(|x, y| x.0.cmp(&y.0));
                hits
            };
            let (committed, overlaid) = (found(&after, None), found(&before, Some(&overlay)));
            assert_eq!(committed.len(), overlaid.len(), "{committed:?} {overlaid:?}");
            for (x, y) in committed.iter().zip(&overlaid) {
                assert_eq!(x.0, y.0);
                assert!((x.1 - y.1).abs() < 1e-5 && (x.2 - y.2).abs() < 1e-5, "{x:?} {y:?}");
            }
        }
    }

    #[test]
    fn an_exchange_scores_with_what_its_whole_session_says() {
        let billing = [
            exchange(
                1,
                "Priya wants the double charges gone",
                "We agreed to make charges idempotent.",
            ),
            exchange(2, "where should the retry live?", "In the shared client."),
        ];
        let other = [exchange(1, "where should the retry live?", "In the shared client.")];
        let (_dir, index) = index_of(&[("a", "billing", &billing), ("b", "client", &other)]);
        let hits = search(&index, "retry after Priya's charges", 10);
        let hit = |session: &str, number: u64| {
            hits.iter().find(|h| h.session == session && h.number == number).unwrap().clone()
        };
        // The same exchange in two sessions: the one whose other exchange names Priya and
        // the charges scores more as a whole.
        let (ours, theirs) = (hit("a", 2), hit("b", 1));
        assert!(ours.session_score > theirs.session_score, "{ours:?} {theirs:?}");
        assert!(theirs.session_score > 0.0);
        assert_eq!(hit("a", 1).session_score, ours.session_score);
    }

    #[test]
    fn filters_let_through_and_score_nothing() {
        let exchanges = [Exchange {
            at: Some("2026-11-21T10:15:00Z".into()),
            ..exchange(1, "where should the retry live?", "In the shared client.")
        }];
        let (_dir, index) = index_of(&[("a", "client", &exchanges)]);
        let question = super::super::question::parse("retry client");
        let score = |filter: &Filter| index.search(&question, filter, 5, None).unwrap()[0].score;
        let unfiltered = score(&Filter::default());
        let filters = [
            Filter { folder: Some("/w".into()), ..Filter::default() },
            Filter { engine: Some("claude".into()), ..Filter::default() },
            Filter { since: Some(0), until: Some(i64::MAX), ..Filter::default() },
        ];
        for filter in filters {
            assert_eq!(score(&filter), unfiltered, "{filter:?}");
        }
    }

    /// Words over 40 bytes: Russian of 24 letters, an identifier of 63, a sentence of Chinese.
    const LONG_WORDS: &str = "достопримечательностями supercalifragilisticexpialidociousmethodname 我们决定使用数据库连接池来解决性能问题";

    #[test]
    fn a_word_is_found_however_it_is_cased_as_the_index_cut_it() {
        let exchanges = [exchange(
            1,
            "Which office opens next?",
            &format!("The İSTANBUL office, then \"Grüße Straße\". {LONG_WORDS}"),
        )];
        let (_dir, index) = index_of(&[("a", "offices", &exchanges)]);
        // `İ` lower-cases to `i` and a combining dot: cut again, the question's word came
        // apart where the answer's did not. A long word is found by its start.
        for question in ["İstanbul", "İSTANBUL", "Straße"].into_iter().chain(LONG_WORDS.split(' '))
        {
            assert_eq!(search(&index, question, 5).len(), 1, "{question}");
        }
    }

    #[test]
    fn updates_segments_are_merged_and_a_builds_never_again() {
        use tantivy::indexer::MergePolicy;
        let index = tantivy::Index::create_in_ram(schema().0);
        let merges = |sizes: &[u32]| {
            let segments: Vec<_> = sizes
                .iter()
                .map(|&n| index.new_segment_meta(tantivy::index::SegmentId::generate_random(), n))
                .collect();
            merge_policy().compute_merge_candidates(&segments).len()
        };
        // Eight updates, a turn's session each: merged.
        assert_eq!(merges(&[2; 8]), 1);
        assert_eq!(merges(&[2; 7]), 0);
        // A build's segments (2,000 sessions a commit), and what the largest merge makes.
        assert_eq!(merges(&[9_849; 8]), 0);
        assert_eq!(merges(&[1_200; 8]), 0);
    }

    #[test]
    fn merging_every_segment_keeps_what_is_found_and_the_commits_digest() {
        let (temp, mut index) =
            index_of(&[("a", "deploys", &[exchange(1, "Which region?", "eu-west")])]);
        let dir = temp.path().join("index");
        let stamps: Stamps = [("a".to_string(), 1), ("b".to_string(), 2)].into_iter().collect();
        let mut writer = index.writer(0).unwrap();
        let second = [exchange(1, "Which bucket for the region?", "logs-eu")];
        let session = Session {
            id: "b",
            title: "buckets",
            name: None,
            engine: "gemini",
            folder: "/w",
            created: "",
            exchanges: &second,
        };
        index.add(&writer, &session).unwrap();
        index.commit(&mut writer, &dir, &stamps, Vec::new()).unwrap();
        drop(writer);
        let segments = || index.index.searchable_segment_ids().unwrap().len();
        assert_eq!(segments(), 2);
        let before: Vec<(String, f32)> =
            search(&index, "region", 5).into_iter().map(|h| (h.session, h.score)).collect();
        let (_, digest_before) = Index::open(&dir).unwrap();

        index.merge_all().unwrap();
        assert_eq!(segments(), 1);
        let (reopened, digest_after) = Index::open(&dir).unwrap();
        assert_eq!(digest_after, digest_before, "the payload stays the last commit's");
        assert_eq!(stamps::read(&dir, digest_after).unwrap(), stamps);
        let after: Vec<(String, f32)> =
            search(&reopened, "region", 5).into_iter().map(|h| (h.session, h.score)).collect();
        assert_eq!(after, before);
        reopened.merge_all().unwrap();
        // The stored fields' small blocks are the index's, for every segment written later.
        assert_eq!(reopened.index.settings().docstore_blocksize, settings().docstore_blocksize);
    }
}
