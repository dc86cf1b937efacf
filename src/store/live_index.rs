//! The live index, `live/ID.json`: a session's latest checkpoint and the proof that its
//! transcript still holds it (the file's stamp and a seal of the checkpoint's record), so that a
//! turn reads only the live context. A cache, never trusted without that proof.

use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};

use crate::transcript::Checkpoint;

use super::Store;
use super::files::{make_private_dir, open_cache_in_place, read_regular};

impl Store {
    /// The session's live index, if there is one that reads.
    pub(super) fn read_live_index(&self, id: &str) -> Option<LiveIndex> {
        let bytes = read_regular(&self.live_index_path(id)).ok()?;
        LiveIndex::decode(&bytes).filter(|index| index.id == id)
    }

    /// Records the transcript's stamp and latest checkpoint (sealed here). A cache: if it cannot
    /// be written, the next turn reads the whole file, as it would without it.
    pub(super) fn write_live_index(
        &self,
        id: &str,
        file: &File,
        stamp: Stamp,
        checkpoint: Option<Checkpoint>,
    ) {
        let seal = match &checkpoint {
            Some(c) => match seal(file, &c.record) {
                Ok(seal) => seal,
                Err(_) => return,
            },
            None => 0,
        };
        let index =
            LiveIndex { format: LiveIndex::FORMAT, id: id.to_string(), stamp, checkpoint, seal };
        self.keep_live_index(&index);
    }

    /// Writes a live index, in place: it is rewritten at every append, where a temp file and a
    /// rename would cost more than the append (a fraction of a millisecond to a millisecond on
    /// a busy disk, against microseconds), and its checksum makes a copy read half-written, or
    /// left so by a crash, read as none. Writers hold the session's lock.
    pub(super) fn keep_live_index(&self, index: &LiveIndex) {
        let path = self.live_index_path(&index.id);
        let open = || open_cache_in_place(&path);
        let file = match open() {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                make_private_dir(&self.live_dir()).ok().and_then(|()| open().ok())
            }
            opened => opened.ok(),
        };
        let Some(file) = file else { return };
        let bytes = index.encode();
        // Not truncated to nothing first: that makes some file systems flush it on close.
        let _ = file.write_all_at(&bytes, 0).and_then(|()| file.set_len(bytes.len() as u64));
    }
}

/// `$CCA_HOME/live/ID.json`: the latest checkpoint of a session's transcript (just after its
/// last clear or compaction), and what proves the transcript still holds it.
///
/// The proof is the file's stamp (device, inode, size, modification and change times) as cca
/// last read or appended to it under the session lock, plus a hash of the checkpoint's record;
/// the index itself carries a checksum, so that a copy half-written is no index at all.
/// Any other change to the file (an edit, a truncation, a replacement, an append by anything
/// but a cca holding the lock) changes the stamp, and the next reader reads the whole file, as
/// it would without an index (and records the checkpoint it finds). A change that keeps size, inode and both
/// times can only come in the same clock tick as the stamp was taken; kernels with fine-grained
/// timestamps (Linux 6.13 and later) give such a change a later time too.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct LiveIndex {
    pub(super) format: u32,
    pub(super) id: String,
    pub(super) stamp: Stamp,
    pub(super) checkpoint: Option<Checkpoint>,
    /// [`seal`] of the checkpoint's record.
    pub(super) seal: u64,
}

impl LiveIndex {
    /// 2: the checkpoint's totals leave out usage figures that make no sense. 3: its header
    /// keeps the fields this cca does not know.
    const FORMAT: u32 = 3;

    /// The file's bytes: a checksum of the JSON, a space, the JSON.
    fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).expect("plain data serializes");
        let mut bytes = format!("{:016x} ", fnv1a(&[&json])).into_bytes();
        bytes.extend_from_slice(&json);
        bytes
    }

    fn decode(bytes: &[u8]) -> Option<LiveIndex> {
        let (sum, json) = bytes.split_at_checked(17)?;
        let sum = std::str::from_utf8(sum.strip_suffix(b" ")?).ok()?;
        (u64::from_str_radix(sum, 16).ok()? == fnv1a(&[json]))
            .then(|| serde_json::from_slice::<LiveIndex>(json).ok())
            .flatten()
            .filter(|index| index.format == Self::FORMAT)
    }

    /// The checkpoint, if the file (whose stamp matched) still has its record where it was.
    pub(super) fn checkpoint_in(&self, file: &File, size: u64) -> Option<&Checkpoint> {
        let c = self.checkpoint.as_ref()?;
        let fits =
            c.record.start < c.record.end && c.record.end == c.at.offset && c.at.offset <= size;
        (fits && seal(file, &c.record).ok() == Some(self.seal)).then_some(c)
    }
}

/// What identifies a file's contents without reading them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    pub(super) size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    pub(super) fn of(file: &File) -> io::Result<Stamp> {
        let m = file.metadata()?;
        Ok(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    pub(super) fn same_file(&self, other: &Stamp) -> bool {
        (self.dev, self.ino) == (other.dev, other.ino)
    }
}

/// A hash of a record's bytes: its first and last 4 KiB, and its length.
fn seal(file: &File, record: &std::ops::Range<u64>) -> io::Result<u64> {
    const PART: u64 = 4096;
    let len = record.end - record.start;
    let mut head = vec![0u8; len.min(PART) as usize];
    file.read_exact_at(&mut head, record.start)?;
    let tail_len = len.min(2 * PART) - len.min(PART);
    let mut tail = vec![0u8; tail_len as usize];
    file.read_exact_at(&mut tail, record.end - tail_len)?;
    Ok(fnv1a(&[&len.to_le_bytes(), &head, &tail]))
}

/// FNV-1a, 64 bits, of the pieces one after the other.
pub(crate) fn fnv1a(pieces: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for &b in pieces.iter().flat_map(|p| p.iter()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use std::fs::{self, OpenOptions};
    use std::io::Write;
    use std::path::Path;
    use std::time::{Duration, UNIX_EPOCH};

    use proptest::prelude::*;

    use super::*;
    use crate::store::{Appender, Store};
    use crate::transcript::testing::record;
    use crate::transcript::{self, Header, Kind, Meta, Record, Summary};

    fn header() -> Header {
        crate::transcript::testing::header("t")
    }

    fn compaction(through: u64) -> Record {
        Record {
            kind: Kind::Compaction,
            meta: Meta { first: Some(1), through: Some(through), ..Meta::default() },
            content: format!("summary of 1-{through}"),
        }
    }

    fn records(rs: &[Record]) -> String {
        rs.iter().map(|r| transcript::render_record(r, 1)).collect()
    }

    /// A store in a temp folder with one session holding `body` after its header.
    fn session(body: &str) -> (tempfile::TempDir, Store, String) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path().join("cca"));
        let id = store
            .create_session("20261121-101500", |_| transcript::render_header(&header()) + body)
            .unwrap();
        (dir, store, id)
    }

    /// What reading the whole file gives; `None` when it is not a transcript.
    fn whole(store: &Store, id: &str) -> Option<Summary> {
        let bytes = fs::read(store.session_path(id)).unwrap();
        transcript::summarize(&bytes[..]).unwrap().ok()
    }

    /// A change by another program, at a time of its own (as any later clock tick gives it; see
    /// `LiveIndex` for the one change a stamp cannot see).
    fn by_hand(store: &Store, id: &str, change: impl FnOnce(&Path), n: &mut u64) {
        let path = store.session_path(id);
        change(&path);
        *n += 1;
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_modified(UNIX_EPOCH + Duration::from_secs(1_000_000 + *n)).unwrap();
    }

    #[test]
    fn the_live_index_follows_the_last_clear_and_cca_appends() {
        let body = records(&[
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::Clear, ""),
            record(Kind::User, "2"),
            record(Kind::Assistant, "a2"),
        ]);
        let (_dir, store, id) = session(&body);
        assert!(store.read_live_index(&id).is_none());
        // Listing and showing read it, but never write it.
        store.summarize_unlocked(&id).unwrap();
        assert!(store.read_live_index(&id).is_none());

        let summary = store.summarize(&id).unwrap();
        let index = store.read_live_index(&id).unwrap();
        let text = fs::read_to_string(store.session_path(&id)).unwrap();
        let checkpoint = index.checkpoint.clone().unwrap();
        assert_eq!(checkpoint.record.start, text.find("<!-- cca:clear").unwrap() as u64);
        assert_eq!(index.stamp, Stamp::of(&store.open_session(&id).unwrap()).unwrap());

        // A turn's appends keep it current, with the same checkpoint.
        let mut appender = Appender::open(&store, &id).unwrap();
        appender.append(records(&[record(Kind::User, "3")]).as_bytes()).unwrap();
        appender.append(records(&[record(Kind::Assistant, "a3")]).as_bytes()).unwrap();
        let index = store.read_live_index(&id).unwrap();
        assert_eq!(index.checkpoint.as_ref().map(|c| c.at), Some(checkpoint.at));
        assert_eq!(index.stamp, Stamp::of(&store.open_session(&id).unwrap()).unwrap());
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());

        // A clear appended after a summary moves it to the end, without a read.
        let summary_now = store.summarize(&id).unwrap();
        assert_ne!(summary_now, summary);
        appender
            .append_after(&summary_now, records(&[record(Kind::Clear, "")]).as_bytes())
            .unwrap();
        let size = fs::metadata(store.session_path(&id)).unwrap().len();
        let index = store.read_live_index(&id).unwrap();
        assert_eq!(index.checkpoint.as_ref().map(|c| c.at.offset), Some(size));
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());

        // A summary older than the file cannot be read on from: the checkpoint stays.
        appender.append_after(&summary, records(&[compaction(1)]).as_bytes()).unwrap();
        let later = store.read_live_index(&id).unwrap();
        assert_eq!(later.checkpoint.map(|c| c.at), index.checkpoint.map(|c| c.at));
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());

        // Removing the session removes its index and its engines' notes, and no other's.
        store.keep_engine_notes(&id, "claude", "[]").unwrap();
        store.keep_engine_notes("other", "claude", "[1]").unwrap();
        assert_eq!(store.engine_notes(&id, "claude").as_deref(), Some("[]"));
        store.remove(&id, true).unwrap();
        assert!(!store.live_index_path(&id).exists());
        assert_eq!(store.engine_notes(&id, "claude"), None);
        assert_eq!(store.engine_notes("other", "claude").as_deref(), Some("[1]"));
    }

    #[test]
    fn a_session_never_cleared_gets_an_index_at_its_first_clear() {
        let body = records(&[record(Kind::User, "1"), record(Kind::Assistant, "a1")]);
        let (_dir, store, id) = session(&body);
        // Its turns have nothing to skip, and write nothing.
        store.summarize(&id).unwrap();
        let mut appender = Appender::open(&store, &id).unwrap();
        appender.append(records(&[record(Kind::User, "2")]).as_bytes()).unwrap();
        assert!(store.read_live_index(&id).is_none());
        // `cca clear`: the file as read is recorded, then the clear is read on from the summary.
        let summary = store.summarize_to_append(&id).unwrap();
        let index = store.read_live_index(&id).unwrap();
        assert!(index.checkpoint.is_none());
        appender.append_after(&summary, records(&[record(Kind::Clear, "")]).as_bytes()).unwrap();
        let size = fs::metadata(store.session_path(&id)).unwrap().len();
        let index = store.read_live_index(&id).unwrap();
        assert_eq!(index.checkpoint.map(|c| c.at.offset), Some(size));
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());
        // A record cut off at the end (a crash) cannot be read on from: the next read finds the
        // clear instead.
        let (_dir, store, id) = session(&(body + "\n<!-- cca:user -->\n## 2. You\n\ncut"));
        let summary = store.summarize_to_append(&id).unwrap();
        let mut appender = Appender::open(&store, &id).unwrap();
        appender.append_after(&summary, records(&[record(Kind::Clear, "")]).as_bytes()).unwrap();
        assert!(store.read_live_index(&id).unwrap().checkpoint.is_none());
        assert_eq!(store.summarize(&id).unwrap(), whole(&store, &id).unwrap());
        assert!(store.read_live_index(&id).unwrap().checkpoint.is_some());
    }

    #[test]
    fn a_stale_or_broken_live_index_is_not_trusted() {
        let body = records(&[
            record(Kind::User, "1"),
            record(Kind::Assistant, "a1"),
            record(Kind::Clear, ""),
            record(Kind::User, "2"),
            record(Kind::Assistant, "a2"),
        ]);
        let (_dir, store, id) = session(&body);
        store.summarize(&id).unwrap();
        let good = fs::read(store.live_index_path(&id)).unwrap();
        let expected = whole(&store, &id).unwrap();
        let mut index: serde_json::Value = serde_json::from_slice(&good[17..]).unwrap();
        // A checkpoint moved (its stamp still right, its checksum too): its record is not
        // where it says.
        index["checkpoint"]["at"]["offset"] = serde_json::json!(expected.header_end);
        index["checkpoint"]["record"]["start"] = serde_json::json!(expected.header_end - 20);
        index["checkpoint"]["record"]["end"] = serde_json::json!(expected.header_end);
        let moved: LiveIndex = serde_json::from_value(index).unwrap();
        // A copy read while it was being written, or left so by a crash: half of it, or a mix
        // of two versions (here, one that counts other exchanges before the checkpoint).
        let text = String::from_utf8(good.clone()).unwrap();
        assert!(text.contains("\"exchanges\":1,"), "{text}");
        let torn = text.replace("\"exchanges\":1,", "\"exchanges\":7,").into_bytes();
        let forged = [
            moved.encode(),
            torn,
            good[..good.len() / 2].to_vec(),
            good[17..].to_vec(),
            Vec::new(),
            good.clone(),
        ];
        for (n, bytes) in forged.iter().enumerate() {
            fs::write(store.live_index_path(&id), bytes).unwrap();
            assert_eq!(store.summarize_unlocked(&id).unwrap(), expected, "{n}");
            assert_eq!(store.summarize(&id).unwrap(), expected, "{n}");
        }
        // An index of the file as it was before an edit by hand, put back after it.
        let mut n = 0;
        by_hand(
            &store,
            &id,
            |p| {
                let text = fs::read_to_string(p).unwrap().replace("<!-- cca:clear -->", "by hand");
                fs::write(p, text).unwrap();
            },
            &mut n,
        );
        fs::write(store.live_index_path(&id), &good).unwrap();
        let edited = whole(&store, &id).unwrap();
        assert_eq!(edited.live.exchanges.len(), 2);
        assert_eq!(store.summarize(&id).unwrap(), edited);
    }

    #[derive(Debug, Clone)]
    enum Op {
        /// A turn: its summary read, then its records appended one by one.
        Turn(Vec<Record>),
        /// `cca clear` or `cca compact`: the summary read, then one record appended after it.
        After(Box<Record>),
        /// Bytes at a place replaced by others, in place.
        Edit(prop::sample::Index, usize, String),
        /// One ASCII byte replaced by another: the size stays.
        Retype(prop::sample::Index),
        Truncate(prop::sample::Index),
        /// Text appended by another program.
        Append(String),
        /// The file replaced by a copy (as editors that write a new file and rename it do).
        Replace,
    }

    fn any_record() -> impl Strategy<Value = Record> {
        let kind = prop::sample::select(vec![
            Kind::User,
            Kind::Assistant,
            Kind::Attachment,
            Kind::Failed,
            Kind::Interrupted,
            Kind::Clear,
            Kind::Compaction,
        ]);
        let content = prop::sample::select(vec![
            "",
            "text",
            "<!-- cca:end -->",
            "\\<!-- cca:clear -->\n",
            "```\nopen fence",
        ]);
        (kind, content, 0u64..6).prop_map(|(kind, content, through)| match kind {
            Kind::Compaction => Record { content: content.into(), ..compaction(through) },
            kind => record(kind, content),
        })
    }

    fn any_op() -> impl Strategy<Value = Op> {
        let text = prop::sample::select(vec![
            "x",
            "\n",
            "<!-- cca:clear -->\n",
            "\n<!-- cca:end -->\n",
            "<!-- cca:",
            "a longer piece of text\n",
        ])
        .prop_map(str::to_string);
        prop_oneof![
            4 => prop::collection::vec(any_record(), 1..3).prop_map(Op::Turn),
            3 => any_record().prop_map(|r| Op::After(Box::new(r))),
            1 => (any::<prop::sample::Index>(), 0usize..30, text.clone())
                .prop_map(|(at, len, text)| Op::Edit(at, len, text)),
            1 => any::<prop::sample::Index>().prop_map(Op::Retype),
            1 => any::<prop::sample::Index>().prop_map(Op::Truncate),
            1 => text.prop_map(Op::Append),
            1 => Just(Op::Replace),
        ]
    }

    fn apply(store: &Store, id: &str, op: &Op, n: &mut u64) {
        let text = fs::read_to_string(store.session_path(id)).unwrap();
        let boundary = |at: &prop::sample::Index| {
            let at = at.index(text.len() + 1);
            (0..=at).rev().find(|&i| text.is_char_boundary(i)).unwrap()
        };
        match op {
            Op::Turn(rs) => {
                let _ = store.summarize(id);
                let mut appender = Appender::open(store, id).unwrap();
                for r in rs {
                    appender.append(records(std::slice::from_ref(r)).as_bytes()).unwrap();
                }
            }
            Op::After(r) => {
                if let Ok(summary) = store.summarize_to_append(id) {
                    let mut appender = Appender::open(store, id).unwrap();
                    appender
                        .append_after(&summary, records(std::slice::from_ref(r)).as_bytes())
                        .unwrap();
                }
            }
            Op::Edit(at, len, insert) => {
                let at = boundary(at);
                let end = (at + len).min(text.len());
                let end = (end..=text.len()).find(|&i| text.is_char_boundary(i)).unwrap();
                let edited = format!("{}{insert}{}", &text[..at], &text[end..]);
                by_hand(store, id, |p| fs::write(p, edited).unwrap(), n);
            }
            Op::Retype(at) => {
                let mut bytes = text.into_bytes();
                let Some(i) = (0..bytes.len())
                    .map(|i| (at.index(bytes.len()) + i) % bytes.len())
                    .find(|&i| bytes[i].is_ascii_graphic())
                else {
                    return;
                };
                bytes[i] = if bytes[i] == b'x' { b'y' } else { b'x' };
                by_hand(store, id, |p| fs::write(p, bytes).unwrap(), n);
            }
            Op::Truncate(at) => {
                let at = boundary(at) as u64;
                by_hand(
                    store,
                    id,
                    |p| OpenOptions::new().write(true).open(p).unwrap().set_len(at).unwrap(),
                    n,
                );
            }
            Op::Append(more) => {
                let mut file =
                    OpenOptions::new().append(true).open(store.session_path(id)).unwrap();
                file.write_all(more.as_bytes()).unwrap();
            }
            Op::Replace => {
                let path = store.session_path(id);
                let copy = path.with_extension("copy");
                fs::write(&copy, &text).unwrap();
                fs::rename(&copy, &path).unwrap();
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever happens to the file (cca's turns, clears and compactions; edits, retyped
        /// bytes, truncations, appends and replacements by others), what is read is what a
        /// read of the whole file gives, with the live index or without it.
        #[test]
        fn what_is_read_is_what_the_file_holds(
            start in prop::collection::vec(any_record(), 0..8),
            ops in prop::collection::vec(any_op(), 1..12),
        ) {
            let (_dir, store, id) = session(&records(&start));
            let mut n = 0;
            for op in &ops {
                apply(&store, &id, op, &mut n);
                let expected = whole(&store, &id);
                prop_assert_eq!(store.summarize_unlocked(&id).ok(), expected.clone(), "{:?}", op);
                prop_assert_eq!(store.summarize(&id).ok(), expected.clone(), "{:?}", op);
                prop_assert_eq!(store.summarize(&id).ok(), expected, "{:?}", op);
            }
        }
    }
}
