//! Sync's records: what one machine says happened to one session, one record a line in that
//! machine's log for the session. Pure: making a record from a transcript's change, applying
//! one, and the record's text.
//!
//! A session's records form a tree: each names the record it follows (`parent`), the first
//! none. A local session is one path through the tree, at its `base`; two machines that each
//! continued it made two children of one record, and neither is lost (see `super::receive`).

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One change to one session, as a machine recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// `MACHINE:SEQ`: the machine's id and the record's number among all of its records, so
    /// unique on the remote without asking anyone.
    pub id: String,
    /// The record this one follows in the session's history; none for a session's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The session, by the id it was created with (its file name where it was made).
    pub session: String,
    /// The name of the machine that wrote it (its host name), for a fork named after it.
    pub machine: String,
    /// When the change was made (RFC 3339 UTC): the transcript's modification time for a
    /// change of its text, the sync's time for a removal or a restore.
    pub at: String,
    #[serde(flatten)]
    pub change: Change,
    /// The transcript after this record: its SHA-256 (hex), to know it again.
    pub hash: String,
}

/// What happened to the transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub(crate) enum Change {
    /// The whole transcript: a session's first record, or one changed other than at its end
    /// (a hand edit, a name in the header, a cut-off record set aside).
    Whole { text: String },
    /// Text added at the end: a turn, a clear, a compaction.
    Append { text: String },
    /// Moved to the trash (or deleted, which a machine that still has it takes as the trash).
    Remove,
    /// Brought back from the trash.
    Restore,
}

/// An image a session links to (`$CCA_HOME/files/NAME`), as the remote keeps it: one sealed
/// line in `files/TOKEN`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ImageCopy {
    pub name: String,
    /// The image's bytes, base64.
    pub base64: String,
}

/// The SHA-256 of a transcript, as records name it.
pub(crate) fn hash(text: &[u8]) -> String {
    let digest = Sha256::digest(text);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The change from a transcript as it was last synced (`synced_len` bytes hashing to
/// `synced_hash`) to `now`; `None` when nothing changed.
pub(crate) fn change_since(synced_len: u64, synced_hash: &str, now: &str) -> Option<Change> {
    let now_bytes = now.as_bytes();
    if now_bytes.len() as u64 == synced_len && hash(now_bytes) == synced_hash {
        return None;
    }
    let kept = usize::try_from(synced_len).ok().filter(|&n| n < now_bytes.len());
    match kept {
        // Only text added at the end: the usual case, a turn.
        Some(n) if now.is_char_boundary(n) && hash(&now_bytes[..n]) == synced_hash => {
            Some(Change::Append { text: now[n..].to_string() })
        }
        _ => Some(Change::Whole { text: now.to_string() }),
    }
}

/// The transcript after `change`, from the one before it.
pub(crate) fn apply(before: &str, change: &Change) -> String {
    match change {
        Change::Whole { text } => text.clone(),
        Change::Append { text } => format!("{before}{text}"),
        Change::Remove | Change::Restore => before.to_string(),
    }
}

impl Record {
    /// The record as one line of JSON (no newline).
    pub(crate) fn to_line(&self) -> String {
        serde_json::to_string(self).expect("a record is plain data")
    }

    /// A record from its line; an error says what is wrong with it.
    pub(crate) fn from_line(line: &[u8]) -> Result<Record, String> {
        serde_json::from_slice(line).map_err(|e| format!("not a record: {e}"))
    }

    /// About how many bytes it holds.
    pub(crate) fn size(&self) -> usize {
        match &self.change {
            Change::Whole { text } | Change::Append { text } => text.len(),
            Change::Remove | Change::Restore => 0,
        }
    }

    /// The machine id its id starts with.
    pub(crate) fn machine_id(&self) -> &str {
        self.id.split_once(':').map_or(self.id.as_str(), |(machine, _)| machine)
    }

    /// Its number among its machine's records (`SEQ` of `MACHINE:SEQ`), which grows down a log.
    pub(crate) fn seq(&self) -> u64 {
        self.id.rsplit(':').next().and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_at_the_end_is_an_append_and_any_other_the_whole_text() {
        let before = "header\n\nturn one\n";
        let synced = (before.len() as u64, hash(before.as_bytes()));
        assert_eq!(change_since(synced.0, &synced.1, before), None);
        let appended = format!("{before}\nturn two\n");
        let change = change_since(synced.0, &synced.1, &appended).unwrap();
        assert_eq!(change, Change::Append { text: "\nturn two\n".into() });
        assert_eq!(apply(before, &change), appended);
        let edited = "header\n\nturn ONE\n\nturn two\n";
        let change = change_since(synced.0, &synced.1, edited).unwrap();
        assert_eq!(change, Change::Whole { text: edited.into() });
        assert_eq!(apply(before, &change), edited);
        // Cut shorter: the whole text.
        assert_eq!(
            change_since(synced.0, &synced.1, "header\n"),
            Some(Change::Whole { text: "header\n".into() })
        );
    }

    #[test]
    fn a_record_reads_back_from_its_line_and_any_text_survives() {
        let record = Record {
            id: "a1b2c3d4:7".into(),
            parent: Some("e5f6a7b8:2".into()),
            session: "20261128-101500".into(),
            machine: "laptop".into(),
            at: "2026-11-28T10:15:00Z".into(),
            change: Change::Append { text: "\u{2028}line\r\n<!-- cca:end -->\n\"quoted\"".into() },
            hash: hash(b"x"),
        };
        let line = record.to_line();
        assert!(!line.contains('\n'));
        assert_eq!(Record::from_line(line.as_bytes()).unwrap(), record);
        assert_eq!(record.machine_id(), "a1b2c3d4");
        assert!(Record::from_line(b"{\"id\":1}").is_err());
    }
}
