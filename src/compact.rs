//! Compaction: when a session's live context would pass a share of the engine's budget, the same
//! engine first summarises the older exchanges (with the `compaction` prompt), keeping the last
//! few verbatim. The summary is recorded in the transcript, with the turns it stands for and the
//! sizes before and after, and takes their place in the context from then on. The file keeps
//! everything; a hand edit of the summary is honoured like any other.

use std::io::Read;

use anyhow::{Context as _, Result};

use crate::call::{self, Call, Verdict};
use crate::error::{Failure, exit};
use crate::human::human_bytes;
use crate::run::{Cancel, Interrupted, Progress};
use crate::session::{self, Session};
use crate::store::Appender;
use crate::transcript::{self, Kind, Live, Meta, Record, Summary};

/// What a compaction folds: the current summary (if any) and every live exchange but the last
/// `keep`. `None` when there is nothing to fold.
pub(crate) fn plan(live: &Live, keep: u64) -> Option<(Live, u64, u64)> {
    let keep = keep as usize;
    if live.exchanges.len() <= keep {
        return None;
    }
    let fold = Live {
        summary: live.summary.clone(),
        summary_turns: live.summary_turns,
        exchanges: live.exchanges[..live.exchanges.len() - keep].to_vec(),
    };
    let through = fold.exchanges.last()?.number;
    let first = live.summary_turns.map_or(fold.exchanges[0].number, |(first, _)| first);
    Some((fold, first, through))
}

/// A compaction that happened.
#[derive(Debug)]
pub(crate) struct Compacted {
    pub first: u64,
    pub through: u64,
    pub bytes_before: u64,
    pub bytes_after: u64,
}

/// How a compaction asked for ended.
#[derive(Debug)]
pub(crate) enum Compaction {
    /// Older exchanges are now a summary.
    Folded(Compacted),
    /// Nothing to fold: the session has no more than `keep` live exchanges.
    Nothing { live: usize, keep: u64 },
}

impl Compaction {
    /// What happened, in a sentence for every front end: `turns 1-3 of ID are now a summary:
    /// 40.0 KiB -> 3.1 KiB of context`, or why nothing was done. `session` names the session.
    pub(crate) fn sentence(&self, session: Option<&str>) -> String {
        match self {
            Compaction::Folded(c) => format!(
                "{}{} {} now a summary: {} -> {} of context",
                crate::human::turns(c.first, c.through),
                session.map(|id| format!(" of {id}")).unwrap_or_default(),
                if c.first == c.through { "is" } else { "are" },
                human_bytes(c.bytes_before),
                human_bytes(c.bytes_after)
            ),
            Compaction::Nothing { live, keep } => format!(
                "nothing to compact{}: {}, and the last {keep} are kept",
                session.map(|id| format!(" in {id}")).unwrap_or_default(),
                crate::human::counted(*live as u64, "live exchange", "live exchanges"),
            ),
        }
    }
}

/// Compacts now; the caller holds the session lock and has repaired a record cut off at the
/// end. The session is read here, as a summary that the compaction's record is appended after
/// ([`crate::store::Store::summarize_to_append`]), so that the live index follows the append
/// without reading the file again.
pub(crate) fn compact(
    ctx: &Session,
    keep: u64,
    cancel: &Cancel,
    progress: &mut dyn FnMut(Progress),
) -> Result<Compaction> {
    let summary = ctx.store.summarize_to_append(ctx.id)?;
    let Some((fold, first, through)) = plan(&summary.live, keep) else {
        return Ok(Compaction::Nothing { live: summary.live.exchanges.len(), keep });
    };
    let fold = std::sync::Arc::new(fold);
    let prompt = session::named_prompt(ctx.store, crate::prompt::COMPACTION)?;
    let folds_summary =
        if fold.summary.is_some() { ", folding in the earlier summary" } else { "" };
    let query = format!(
        "Write the summary of {} of the conversation above{folds_summary}, \
         as your instructions say. Output only the summary.",
        crate::human::turns(first, through)
    );
    let outcome = call::call(
        &Call {
            session: ctx,
            system: &prompt.text,
            live: &fold,
            attachments: &[],
            query: &query,
            inbox: None,
            warm: None,
        },
        cancel,
        progress,
    )?;
    match call::verdict(ctx.engine, &outcome) {
        Verdict::Answered => {}
        Verdict::Interrupted { why } => return Err(Interrupted(why).into()),
        Verdict::Failed { reason, .. } => anyhow::bail!("{reason}"),
    }
    let mut text = String::new();
    let mut answer = outcome.answer;
    answer.read_to_string(&mut text).context("cannot read back the summary")?;
    let text = text.trim().to_string();
    // A summary no shorter than what it stands for would only make every later turn dearer
    // (an engine that echoes, or one that cannot summarise): it is refused, nothing changed.
    if text.is_empty() || text.len() as u64 >= fold.bytes() {
        let wrote = match text.len() {
            0 => format!("{} wrote an empty summary", ctx.engine.name),
            n => format!(
                "{} wrote a summary of {} for {} of context: no shorter",
                ctx.engine.name,
                human_bytes(n as u64),
                human_bytes(fold.bytes())
            ),
        };
        return Err(Failure::new(exit::ERROR, format!("{wrote}, so nothing was changed"))
        .hint("the session's engine writes the summary, and this one did not; start the context anew with `cca clear` instead (the file keeps every exchange)")
        .into());
    }

    let kept: u64 = summary.live.bytes() - fold.bytes();
    let compacted = Compacted {
        first,
        through,
        bytes_before: summary.live.bytes(),
        bytes_after: text.len() as u64 + kept,
    };
    let record = Record {
        kind: Kind::Compaction,
        meta: Meta {
            at: Some(ctx.settings.now_string()),
            engine: Some(ctx.engine.name.clone()),
            model: ctx.model.map(str::to_string),
            duration_ms: Some(outcome.duration.as_millis() as u64),
            first: Some(first),
            through: Some(through),
            bytes_before: Some(compacted.bytes_before),
            bytes_after: Some(compacted.bytes_after),
            ..Meta::default()
        },
        content: text,
    };
    Appender::open(ctx.store, ctx.id)?.append_after(
        &summary,
        transcript::render_record(&record, summary.exchanges + 1).as_bytes(),
    )?;
    Ok(Compaction::Folded(compacted))
}

/// Why a turn about to be sent should be compacted first.
#[derive(Debug)]
pub(crate) struct Needed {
    pub tokens: u64,
    pub budget: u64,
    pub first: u64,
    pub through: u64,
}

/// Whether the turn about to be sent (`system` and `new_bytes` on top of the live context)
/// would pass the compaction threshold, with something to fold.
pub(crate) fn needed(
    ctx: &Session,
    summary: &Summary,
    system: &str,
    new_bytes: usize,
) -> Option<Needed> {
    let settings = ctx.settings;
    if !settings.compaction.enabled.value {
        return None;
    }
    let budget = ctx.engine.budget(ctx.model);
    let tokens = ctx.engine.tokens(summary.live.bytes() + (system.len() + new_bytes) as u64);
    if (tokens as f64) <= budget as f64 * settings.compaction.threshold {
        return None;
    }
    let (_, first, through) = plan(&summary.live, settings.compaction.keep_recent)?;
    Some(Needed { tokens, budget, first, through })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::ExchangeSpans;

    fn exchange(number: u64) -> ExchangeSpans {
        let at = number * 10;
        ExchangeSpans { number, user: at..at + 2, attachments: vec![], assistant: at + 3..at + 8 }
    }

    #[test]
    fn every_front_end_words_a_compaction_alike() {
        let one = Compaction::Folded(Compacted {
            first: 1,
            through: 1,
            bytes_before: 4096,
            bytes_after: 100,
        });
        assert_eq!(
            one.sentence(Some("20261121-101500")),
            "turn 1 of 20261121-101500 is now a summary: 4.0 KiB -> 100 bytes of context"
        );
        let two = Compaction::Folded(Compacted {
            first: 1,
            through: 3,
            bytes_before: 10,
            bytes_after: 5,
        });
        assert!(two.sentence(None).starts_with("turns 1-3 are now a summary: "));
        let nothing = Compaction::Nothing { live: 2, keep: 4 };
        assert_eq!(
            nothing.sentence(None),
            "nothing to compact: 2 live exchanges, and the last 4 are kept"
        );
    }

    #[test]
    fn plans_fold_all_but_the_most_recent() {
        let live =
            Live { summary: None, summary_turns: None, exchanges: (1..=6).map(exchange).collect() };
        let (fold, first, through) = plan(&live, 4).unwrap();
        assert_eq!((first, through), (1, 2));
        assert_eq!(fold.exchanges.len(), 2);
        assert!(plan(&live, 6).is_none());

        // A second compaction folds the first summary in and stands for everything before.
        let live = Live {
            summary: Some(0..5),
            summary_turns: Some((1, 2)),
            exchanges: (3..=9).map(exchange).collect(),
        };
        let (fold, first, through) = plan(&live, 4).unwrap();
        assert_eq!((first, through), (1, 5));
        assert_eq!(fold.summary, Some(0..5));
    }
}
