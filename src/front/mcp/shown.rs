//! How `cca mcp` shows a conversation's records and its sessions to an agent: the headings and
//! lines that both reading (`tools`) and finding (`find`) use.

use crate::transcript::{self, Header, Kind, Meta};

/// One record of a conversation, read.
pub(super) struct Text {
    pub(super) turn: u64,
    pub(super) kind: Kind,
    pub(super) meta: Meta,
    /// Its content, or the first part of it.
    pub(super) text: String,
    /// The size of the whole content, as stored.
    pub(super) whole: u64,
    /// Only the first part of the content was read.
    pub(super) partial: bool,
}

pub(super) fn record_heading(r: &Text) -> String {
    let at = r.meta.at.as_deref().map(|at| format!(" ({at})")).unwrap_or_default();
    let who = || {
        let engine = r.meta.engine.as_deref().unwrap_or("answer");
        match &r.meta.model {
            Some(model) => format!("{engine}, {model}"),
            None => engine.to_string(),
        }
    };
    match r.kind {
        Kind::User => format!("{}. Question{at}", r.turn),
        Kind::Attachment => {
            format!("{}. Attached: {}", r.turn, r.meta.name.as_deref().unwrap_or("context"))
        }
        Kind::Assistant => format!("{}. Answer ({}){at}", r.turn, who()),
        Kind::Failed => format!(
            "{}. Not answered ({}): {}",
            r.turn,
            who(),
            r.meta.reason.as_deref().unwrap_or("failed")
        ),
        Kind::Interrupted => format!(
            "{}. Interrupted ({}): {}",
            r.turn,
            who(),
            r.meta.reason.as_deref().unwrap_or("stopped")
        ),
        Kind::Clear => "Context cleared: the engine did not see the exchanges above again".into(),
        Kind::Compaction => format!(
            "Summary of exchanges {} to {} (sent to the engine in their place)",
            r.meta.first.unwrap_or(1),
            r.meta.through.unwrap_or(0)
        ),
    }
}

pub(super) fn quoted_title(title: &str) -> String {
    match title.is_empty() {
        true => "(untitled)".into(),
        false => format!("\"{}\"", transcript::one_line(title, 100)),
    }
}

pub(super) fn session_line(id: &str, h: &Header) -> String {
    let name = h.name.as_deref().map(|n| format!(" · name {n}")).unwrap_or_default();
    let model = h.model.as_deref().map(|m| format!(" ({m})")).unwrap_or_default();
    format!(
        "Conversation {id}{name} · {} · {}{model} · started {} · folder {}",
        quoted_title(&h.title),
        h.engine,
        h.created,
        h.cwd
    )
}
