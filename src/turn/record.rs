//! The turn's records: the question, each answer or attempt with what arrived of it, steers,
//! and the steers an engine never took, appended in order under the session's lock. What a
//! record holds is docs/DESIGN.md's transcript format; `transcript` renders it.

use std::fs::File;
use std::io::{self, Read};
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Ask, Event, Level, Observer, Settled};
use crate::call::{self, Verdict};
use crate::config::Settings;
use crate::engine::Usage;
use crate::error::{Failure, exit};
use crate::run;
use crate::session::Session;
use crate::steer::Steered;
use crate::store::Appender;
use crate::transcript::{self, BodyWriter, Kind, Meta, Record, Totals};

/// The turn's side of the transcript: appends its records in order, numbering exchanges, and
/// adds up what the answers cost.
pub(super) struct Recorder<'a> {
    session: Session<'a>,
    appender: Appender,
    /// The records of the question being answered (the turn's, then a steer asked as the next
    /// exchange), to find them again in a file replaced during the turn.
    question: String,
    /// Where they were appended.
    question_at: u64,
    /// The exchange the next record belongs to.
    pub(super) turn: u64,
    /// What every answer in the session has cost, this turn's so far included.
    pub(super) spent: Totals,
}

impl<'a> Recorder<'a> {
    /// Records the question (after the outcome of one left without answer, if there is one).
    pub(super) fn start(
        session: Session<'a>,
        ask: &Ask,
        now: &chrono::DateTime<chrono::Utc>,
        settled: &Settled,
    ) -> Result<Recorder<'a>> {
        let turn = settled.summary.exchanges + 1;
        let mut appender = Appender::open(session.store, session.id)?;
        if settled.left_without_answer {
            appender.append(cut_question_record(session.settings, turn).as_bytes())?;
        }
        let question = question_records(ask, now, turn);
        appender.append(question.as_bytes())?;
        let question_at = appender.len()? - question.len() as u64;
        let spent = settled.summary.totals;
        Ok(Recorder { session, appender, question, question_at, turn, spent })
    }

    /// Goes on in the file now at the session's path if an editor replaced it during the turn,
    /// with the question appended there unless the new file has it; the same when an editor
    /// saved over the file in place a version without the question.
    pub(super) fn follow_replacement(&mut self, observer: &mut dyn Observer) -> Result<()> {
        let replaced = self.appender.follow_replacement()?;
        if !replaced && self.appender.holds_at(self.question_at, self.question.as_bytes()) {
            return Ok(());
        }
        // The editor's version may have been loaded before the question was appended.
        let kept = self.appender.contains(self.question.as_bytes());
        if !kept {
            self.appender.append(self.question.as_bytes())?;
            self.question_at = self.appender.len()? - self.question.len() as u64;
        }
        let path = self.session.store.session_path(self.session.id);
        let text = match (replaced, kept) {
            // Saved in place with the question in it: an edit like any other.
            (false, true) => return Ok(()),
            (false, false) => format!(
                "warning: {} was saved over during the turn (an editor wrote a version without \
                 the question as it was asked); the question and its outcome are appended to it \
                 again",
                path.display()
            ),
            (true, _) => format!(
                "warning: {} was replaced during the turn (an editor saved it as a new file); \
                 the {}outcome is appended to the file now at that path",
                path.display(),
                if kept { "" } else { "question and its " },
            ),
        };
        observer.event(Event::Notice { level: Level::Warning, text: &text });
        Ok(())
    }

    /// Records what one run of the engine gave: each answer it ended by taking a steer,
    /// followed by that steer, then the last answer (or attempt).
    pub(super) fn answers(
        &mut self,
        mut answer: Option<File>,
        earlier: &[run::Earlier],
        last: &Attempt,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        let engine = &self.session.engine.name;
        if let Some(file) = answer.as_mut() {
            let end = io::Seek::stream_position(file).context("cannot read back the answer")?;
            for earlier in earlier {
                io::Seek::seek(file, io::SeekFrom::Start(earlier.range.start))
                    .context("cannot read back the answer")?;
                let mut part = Read::take(&mut *file, earlier.range.end - earlier.range.start);
                let attempt = Attempt::earlier(earlier);
                attempt.note_left_out(engine, observer);
                self.outcome(&attempt, Some(&mut part))?;
                // Headings number exchanges: an attempt without an answer is not one.
                if matches!(attempt.verdict, Verdict::Answered) {
                    self.turn += 1;
                }
                self.appender.append(
                    user_record(&earlier.steer, self.session.settings, self.turn).as_bytes(),
                )?;
            }
            io::Seek::seek(file, io::SeekFrom::Start(end))
                .context("cannot read back the answer")?;
        }
        self.outcome(last, answer.as_mut().map(|f| f as &mut dyn Read))
    }

    /// Records an answer or attempt, and adds what an answer cost.
    fn outcome(&mut self, attempt: &Attempt, answer: Option<&mut dyn Read>) -> Result<()> {
        let recorded =
            record_outcome(&mut self.appender, &self.session, attempt, answer, self.turn)?;
        if let Some(u) = recorded {
            self.spent = self.spent.add(u.input_tokens, u.output_tokens, u.cost_usd);
        }
        Ok(())
    }

    /// A steer asked as the next exchange.
    pub(super) fn steer(&mut self, text: &str) -> Result<()> {
        self.turn += 1;
        let record = user_record(text, self.session.settings, self.turn);
        self.appender.append(record.as_bytes())?;
        // The question now being answered, for [`Self::follow_replacement`].
        self.question_at = self.appender.len()? - record.len() as u64;
        self.question = record;
        Ok(())
    }

    /// Keeps the steers the engine never took as attempts that were not answered, after the
    /// turn's last outcome.
    pub(super) fn not_taken(
        &mut self,
        texts: &[String],
        verdict: &Verdict,
        observer: &mut dyn Observer,
    ) -> Result<()> {
        let settings = self.session.settings;
        let attempt = if matches!(verdict, Verdict::Answered) { self.turn + 1 } else { self.turn };
        for text in texts {
            let reason = match verdict {
                Verdict::Interrupted { why } => {
                    format!("a steer not taken: interrupted ({})", why.name())
                }
                _ => format!("a steer not taken: {} did not answer", self.session.engine.name),
            };
            let records = user_record(text, settings, attempt)
                + &transcript::render_record(
                    &Record {
                        kind: Kind::Failed,
                        meta: Meta {
                            at: Some(settings.now_string()),
                            reason: Some(reason),
                            ..Meta::default()
                        },
                        content: String::new(),
                    },
                    attempt,
                );
            self.appender.append(records.as_bytes())?;
            observer.event(Event::Steer(Steered::NotTaken(text)));
        }
        Ok(())
    }
}

/// The outcome of a question whose turn never ended (cca was killed, the machine went down):
/// it was interrupted, and nothing of its answer was kept.
fn cut_question_record(settings: &Settings, turn: u64) -> String {
    let meta = Meta {
        at: Some(settings.now_string()),
        reason: Some("cca ended before the answer was recorded".into()),
        ..Meta::default()
    };
    transcript::render_record(
        &Record { kind: Kind::Interrupted, meta, content: String::new() },
        turn,
    )
}

/// A steer, as the user record it is.
fn user_record(text: &str, settings: &Settings, turn: u64) -> String {
    transcript::render_record(
        &Record {
            kind: Kind::User,
            meta: Meta { at: Some(settings.now_string()), ..Meta::default() },
            content: text.to_string(),
        },
        turn,
    )
}

/// The question and its attachments, as records to append.
fn question_records(ask: &Ask, now: &chrono::DateTime<chrono::Utc>, turn: u64) -> String {
    let at = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let mut records = transcript::render_record(
        &Record {
            kind: Kind::User,
            meta: Meta { at: Some(at), ..Meta::default() },
            content: ask.query.clone(),
        },
        turn,
    );
    for a in &ask.attachments {
        let meta = match &a.image {
            Some(image) => Meta {
                name: Some(a.name.clone()),
                bytes: Some(image.bytes.len() as u64),
                media_type: Some(image.media_type.to_string()),
                file: Some(image.file_name()),
                ..Meta::default()
            },
            None => Meta {
                name: Some(a.name.clone()),
                bytes: Some(a.text.len() as u64),
                ..Meta::default()
            },
        };
        let record = Record { kind: Kind::Attachment, meta, content: a.text.clone() };
        records.push_str(&transcript::render_record(&record, turn));
    }
    records
}

/// How the engine's last answer ended, and the answer's scratch file.
pub(super) fn ended(
    engine: &crate::engine::EngineConfig,
    outcome: run::EngineRun,
) -> (Attempt, Option<File>) {
    let (usage, left_out) = outcome.usage.clone().checked();
    let ended = Attempt {
        verdict: call::verdict(engine, &outcome),
        duration: outcome.duration,
        usage,
        left_out,
        model: outcome.model,
        stderr_tail: outcome.stderr_tail,
    };
    (ended, Some(outcome.answer))
}

/// How one attempt at an answer ended, as its record keeps it: the verdict and the engine's
/// figures.
pub(super) struct Attempt {
    pub(super) verdict: Verdict,
    pub(super) duration: Duration,
    /// The figures of the engine's usage that make sense ([`Usage::checked`]), and a note for
    /// each one left out.
    pub(super) usage: Usage,
    pub(super) left_out: Vec<String>,
    /// The model the engine said it ran.
    pub(super) model: Option<String>,
    pub(super) stderr_tail: String,
}

impl Attempt {
    /// An answer the engine ended by taking a steer.
    fn earlier(e: &run::Earlier) -> Attempt {
        let verdict = match &e.engine_error {
            Some(error) => Verdict::Failed { reason: error.clone(), hint: None, code: exit::ERROR },
            None if !e.has_text => {
                Verdict::Failed { reason: "an empty answer".into(), hint: None, code: exit::ERROR }
            }
            None => Verdict::Answered,
        };
        let (usage, left_out) = e.usage.clone().checked();
        Attempt {
            verdict,
            duration: e.duration,
            usage,
            left_out,
            model: None,
            stderr_tail: String::new(),
        }
    }

    /// Tells the observer which of the engine's figures were left out.
    pub(super) fn note_left_out(&self, engine: &str, observer: &mut dyn Observer) {
        for note in &self.left_out {
            let text = format!("warning: {engine} reported {note}");
            observer.event(Event::Notice { level: Level::Warning, text: &text });
        }
    }

    /// The engine did not run to an end: `duration` after the attempt began.
    pub(super) fn error(e: &anyhow::Error, duration: Duration) -> Attempt {
        Attempt {
            verdict: Verdict::of_error(e),
            duration,
            usage: Usage::default(),
            left_out: Vec::new(),
            model: None,
            stderr_tail: String::new(),
        }
    }
}

/// Appends the answer, or the failed or interrupted attempt with what arrived of it. Gives the
/// usage it recorded, for an answer.
fn record_outcome(
    appender: &mut Appender,
    session: &Session,
    ended: &Attempt,
    answer: Option<&mut dyn Read>,
    turn: u64,
) -> Result<Option<Usage>> {
    let base = Meta {
        at: Some(session.settings.now_string()),
        engine: Some(session.engine.name.clone()),
        model: session.model.map(str::to_string),
        duration_ms: Some(ended.duration.as_millis() as u64),
        ..Meta::default()
    };
    let (kind, meta) = match &ended.verdict {
        Verdict::Answered => (
            Kind::Assistant,
            Meta {
                input_tokens: ended.usage.input_tokens,
                cached_tokens: ended.usage.cached_tokens,
                output_tokens: ended.usage.output_tokens,
                cost_usd: ended.usage.cost_usd,
                ..base
            },
        ),
        Verdict::Failed { reason, .. } => {
            (Kind::Failed, Meta { reason: Some(marker_reason(reason)), ..base })
        }
        Verdict::Interrupted { why } => {
            (Kind::Interrupted, Meta { reason: Some(why.name()), ..base })
        }
    };
    appender
        .append_with(|file| {
            use std::io::Write;
            file.write_all(transcript::open_record(kind, &meta, turn).as_bytes())?;
            let mut body = BodyWriter::new();
            let mut out = Vec::with_capacity(72 * 1024);
            // A reason the marker had to cut is kept whole in the body, fenced, before the
            // partial answer: a fence of its own that closes, whatever the answer leaves open.
            if let Verdict::Failed { reason, .. } = &ended.verdict
                && meta.reason.as_deref() != Some(reason.as_str())
            {
                body.push(fenced_reason(reason).as_bytes(), &mut out);
                file.write_all(&out)?;
            }
            if let Some(answer) = answer {
                let mut buf = run::ReadBuf::new();
                loop {
                    let read = buf.read_from(answer)?;
                    if read.is_empty() {
                        break;
                    }
                    out.clear();
                    body.push(read, &mut out);
                    file.write_all(&out)?;
                }
            }
            out.clear();
            body.finish(&mut out);
            file.write_all(&out)
        })
        .map_err(|e| {
            let what = match kind {
                Kind::Assistant => "the answer was shown but could not be saved",
                _ => "the outcome of this attempt could not be saved",
            };
            e.context(Failure::new(exit::ERROR, what).hint(
                "free some disk space; your question is in the transcript, and the next turn will not send it",
            ))
        })?;
    Ok((kind == Kind::Assistant).then(|| ended.usage.clone()))
}

/// How many characters of a failure's reason its marker line keeps: markers stay small (a
/// proxy's error page can be 80 KB), and the heading shows less still.
const MARKER_REASON_CHARS: usize = 300;

/// A failure's reason as its marker keeps it: one line, cut on a character boundary.
fn marker_reason(reason: &str) -> String {
    transcript::one_line(reason, MARKER_REASON_CHARS)
}

/// The whole reason, for the record's body: in a fence longer than any backtick run in it.
fn fenced_reason(reason: &str) -> String {
    let fence = crate::fence::for_text(reason);
    let reason = reason.trim_end_matches('\n');
    format!("The error in full:\n\n{fence}text\n{reason}\n{fence}\n\n")
}
