//! Reading a session: opening its transcript (a regular file only), its header alone, and its
//! summary, read on from the live index's checkpoint when the index proves it still holds.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use anyhow::{Context, Result};

use crate::error::{Failure, exit};
use crate::human::shell_word;
use crate::transcript::{self, Checkpoint, NotTranscript, Summary};

use super::files::open_regular;
use super::live_index::Stamp;
use super::{HEAD_BYTES, Store};

impl Store {
    /// Opens a transcript to read it, wherever it is (in the sessions folder or the trash):
    /// every reader of transcripts opens them here, so a FIFO or a device named like one is
    /// refused, never read (see [`open_regular`]).
    pub(crate) fn open_transcript(&self, path: &Path) -> Result<File> {
        open_regular(path, OpenOptions::new().read(true))
            .with_context(|| format!("cannot open {}", path.display()))
    }

    /// Opens a session for reading. One not there (removed while this waited for its lock,
    /// say) is said to be gone, with where to find it.
    pub(crate) fn open_session(&self, id: &str) -> Result<File> {
        let path = self.session_path(id);
        match open_regular(&path, OpenOptions::new().read(true)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let hint = match self.trashed_path(id).exists() {
                    true => format!("it is in the trash: `cca restore {id}` brings it back"),
                    false => "`cca sessions` lists the sessions there are".to_string(),
                };
                Err(Failure::new(
                    exit::ERROR,
                    format!("session {id} is not there any more (removed, or moved, just now)"),
                )
                .hint(hint)
                .into())
            }
            opened => opened.with_context(|| format!("cannot open {}", path.display())),
        }
    }

    /// A session's whole file, as bytes (recall reads every exchange of a session it indexes).
    pub(crate) fn read_session_bytes(&self, id: &str) -> Result<Vec<u8>> {
        let path = self.session_path(id);
        super::files::read_regular(&path).with_context(|| format!("cannot read {}", path.display()))
    }

    /// A session's header alone, read from the start of its file (for rebuilding the imports'
    /// index); `None` when the file is not a transcript.
    pub(crate) fn header_of(&self, id: &str) -> Option<transcript::Header> {
        let mut head = Vec::new();
        let file =
            super::files::open_regular(&self.session_path(id), File::options().read(true)).ok()?;
        io::Read::take(file, HEAD_BYTES).read_to_end(&mut head).ok()?;
        let text = String::from_utf8_lossy(&head);
        let end = text.find("\n<!-- cca:end -->")? + "\n<!-- cca:end -->\n".len();
        transcript::parse(text.get(..end)?).ok().map(|(t, _)| t.header)
    }

    /// Reads a session's summary: header, live context, counts, problems. Call it holding the
    /// session's lock: it reads only what follows the live index's checkpoint where the index
    /// proves the file unchanged, and records a later checkpoint when it finds one.
    pub(crate) fn summarize(&self, id: &str) -> Result<Summary> {
        self.read_summary(id, Keep::Checkpoints)
    }

    /// Like [`Self::summarize`], for a summary that records will be appended after (a clear, a
    /// compaction: see [`Appender::append_after`](super::Appender::append_after)): the live
    /// index also records the file as read when it has no checkpoint, so that the append can
    /// read on from the summary.
    pub(crate) fn summarize_to_append(&self, id: &str) -> Result<Summary> {
        self.read_summary(id, Keep::Always)
    }

    /// Like [`Self::summarize`], for a reader that does not hold the lock: it uses the live
    /// index but never writes it.
    pub(crate) fn summarize_unlocked(&self, id: &str) -> Result<Summary> {
        self.read_summary(id, Keep::Never)
    }

    /// A session's summary with the offset just past each complete exchange (for forks). Reads
    /// the whole file.
    pub(crate) fn summarize_with_ends(&self, id: &str) -> Result<(Summary, Vec<u64>)> {
        let path = self.session_path(id);
        let file = self.open_session(id)?;
        let read = transcript::exchange_ends(BufReader::with_capacity(256 * 1024, file))
            .with_context(|| format!("cannot read {}", path.display()))?;
        read.map_err(|e| not_transcript(&path, id, e))
    }

    fn read_summary(&self, id: &str, keep: Keep) -> Result<Summary> {
        let path = self.session_path(id);
        let cannot_read = || format!("cannot read {}", path.display());
        let mut file = self.open_session(id)?;
        // The stamp is taken before reading: whatever changes the file after it changes the
        // stamp, so an index written with it can only under-promise.
        let stamp = Stamp::of(&file).with_context(cannot_read)?;
        let known = self.read_live_index(id).filter(|index| index.stamp == stamp);
        let from = known.as_ref().and_then(|index| index.checkpoint_in(&file, stamp.size));
        let start = from.map_or(0, |c| c.at.offset);
        file.seek(SeekFrom::Start(start)).with_context(cannot_read)?;
        // Only the bytes the stamp speaks for: a summary and its stamp describe one file.
        let reader = BufReader::with_capacity(256 * 1024, (&file).take(stamp.size - start));
        let scan = transcript::scan(reader, from)
            .with_context(cannot_read)?
            .map_err(|e| not_transcript(&path, id, e))?;
        // Rewritten unless it says just this already (and its checkpoint, if any, was good).
        let at = |c: &Option<Checkpoint>| c.as_ref().map(|c| c.at);
        let current = known.as_ref().is_some_and(|index| {
            at(&index.checkpoint) == at(&scan.checkpoint)
                && index.checkpoint.is_some() == from.is_some()
        });
        // A session never cleared nor compacted has nothing to skip: its turns write nothing.
        let worth = match keep {
            Keep::Never => false,
            Keep::Checkpoints => scan.checkpoint.is_some(),
            Keep::Always => true,
        };
        if worth && !current {
            self.write_live_index(id, &file, stamp, scan.checkpoint);
        }
        Ok(scan.summary)
    }
}

/// When reading a summary writes the live index.
#[derive(Debug, Clone, Copy)]
enum Keep {
    Never,
    /// When it has a checkpoint to record.
    Checkpoints,
    Always,
}

/// The error for a file that is not a transcript, with what to do about it.
pub(crate) fn not_transcript(path: &Path, id: &str, e: NotTranscript) -> anyhow::Error {
    let message = format!("{} is not a transcript cca can read ({e})", path.display());
    let hint = if e.newer {
        "a newer cca wrote it: update cca (`cca --version` says which this is) to use it"
            .to_string()
    } else if e.not_utf8 {
        // Converting the whole file suits one saved as Latin-1; one that holds UTF-8 beside a
        // stray byte would have its UTF-8 converted twice (café to cafÃ©).
        let has_utf8 = super::files::read_regular(path).is_ok_and(|bytes| {
            String::from_utf8_lossy(&bytes).chars().any(|c| !c.is_ascii() && c != '\u{fffd}')
        });
        let fix = format!(
            "cca reads UTF-8 only: fix line {line} by hand (`\"$EDITOR\" {p}`); `cca show --raw \
             {id}` prints the file as it is",
            p = shell_word(&path.to_string_lossy()),
            line = e.line,
        );
        if has_utf8 {
            fix
        } else {
            format!(
                "{fix}; or, the whole file saved as Latin-1, convert it in place:\n\
                 `iconv -f LATIN1 -t UTF-8 {p} > {u} && cat {u} > {p} && rm {u}`",
                p = shell_word(&path.to_string_lossy()),
                u = shell_word(&format!("{}.utf8", path.to_string_lossy())),
            )
        }
    } else {
        format!(
            "repair it by hand (`\"$EDITOR\" {}`), or start a new session; the id was {id}",
            shell_word(&path.to_string_lossy())
        )
    };
    Failure::new(exit::ERROR, message).hint(hint).into()
}
