//! A loaded session's transcript replayed to the client as `session/update`s, in batches written
//! past the crate's own writer.

use super::*;

impl Acp {
    /// Sends a session's conversation as it happened: each exchange as the user's message and
    /// the agent's answer, clears and summaries where they were; attempts that got no answer
    /// are not exchanges and are left out. Each record is sent as the scanner finds it: nothing
    /// of the file is parsed into records first.
    ///
    /// The updates are written as lines of their own ([`text_update`]), not through the crate:
    /// the crate builds each message as a JSON value and then a string, and for a long session
    /// that was most of the load's time. They go into the queue the crate writes to, so the
    /// load's response, given to the crate afterwards, comes after every one of them; nothing
    /// of this session is on its way through the crate before them.
    pub(super) fn replay(&self, id: &str) -> Result<()> {
        if self.sessions().get(id).is_some_and(|o| o.unwritten.is_some()) {
            return Ok(());
        }
        let path = self.store.session_path(id);
        let text = store::read_text(&path)?;
        let content = |span: &transcript::RecordSpan| {
            transcript::unescape(&text[span.content.start as usize..span.content.end as usize])
        };
        let mut lines = Vec::with_capacity(REPLAY_BATCH + 4096);
        let mut sent: std::io::Result<()> = Ok(());
        let mut send = |kind: &'static str, chunk: &str, lines: &mut Vec<u8>| {
            text_update(lines, id, kind, chunk);
            if lines.len() >= REPLAY_BATCH && sent.is_ok() {
                sent = self.direct.send(lines);
                lines.clear();
            }
        };
        let mut pending: Option<String> = None;
        let mut tools = 0u64;
        // An answer as it was shown: its text, and its tool calls where they were made.
        let mut answer =
            |content: &str,
             lines: &mut Vec<u8>,
             send: &mut dyn FnMut(&'static str, &str, &mut Vec<u8>)| {
                for part in crate::answer::shown(content) {
                    match part {
                        crate::answer::Shown::Text(text) => send(AGENT_CHUNK, text, lines),
                        crate::answer::Shown::Tool(call) => {
                            tools += 1;
                            let update = acp::SessionUpdate::ToolCall(tool_call(
                                format!("{id}-tool-replayed-{tools}"),
                                &call,
                            ));
                            update_line(lines, id, update);
                        }
                    }
                }
            };
        let scanned = transcript::Scanner::scan(text.as_bytes(), |event| {
            let transcript::Event::Record(record) = event else { return };
            match record.kind {
                Kind::User => pending = Some(content(&record)),
                Kind::Attachment => {
                    if let Some(question) = &mut pending {
                        let attached = content(&record);
                        let image_dir = self.store.image_dir();
                        match content::replayed_image(&record.meta, &image_dir) {
                            Some(link) => question.push_str(&format!("\n\n{link}")),
                            None => {
                                let fence = crate::fence::for_text(&attached);
                                question.push_str(&format!("\n\n{fence}\n{attached}\n{fence}"));
                            }
                        }
                    }
                }
                Kind::Assistant => {
                    if let Some(question) = pending.take() {
                        send(USER_CHUNK, &question, &mut lines);
                        answer(&content(&record), &mut lines, &mut send);
                    }
                }
                // An attempt that got no answer, as the user saw it: the question, what
                // arrived, and that it was not answered (it is never sent again).
                Kind::Failed | Kind::Interrupted => {
                    if let Some(question) = pending.take() {
                        send(USER_CHUNK, &question, &mut lines);
                        answer(&content(&record), &mut lines, &mut send);
                        let what = if record.kind == Kind::Failed {
                            "Not answered"
                        } else {
                            "Interrupted"
                        };
                        let why = record.meta.reason.as_deref().unwrap_or("no reason recorded");
                        send(
                            THOUGHT_CHUNK,
                            &format!("{what} ({why}); not sent again.\n"),
                            &mut lines,
                        );
                    }
                }
                Kind::Clear => send(
                    AGENT_CHUNK,
                    "*Context cleared: the turns above are not sent again.*",
                    &mut lines,
                ),
                Kind::Compaction => {
                    let (first, through) =
                        (record.meta.first.unwrap_or(1), record.meta.through.unwrap_or(0));
                    let summary = format!(
                        "*Summary of {} (sent in their place):*\n\n{}",
                        crate::human::turns(first, through),
                        content(&record)
                    );
                    send(AGENT_CHUNK, &summary, &mut lines);
                }
            }
        })
        .expect("reading from memory cannot fail");
        // A question the file ends with, without an outcome: its turn was cut (cca was killed).
        if let Some(question) = pending.take() {
            send(USER_CHUNK, &question, &mut lines);
            send(
                THOUGHT_CHUNK,
                "Interrupted (cca ended before the answer was recorded); not sent again.\n",
                &mut lines,
            );
        }
        if sent.is_ok() && !lines.is_empty() {
            sent = self.direct.send(&lines);
        }
        scanned.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        sent.context("cannot write stdout")
    }
}

/// How many bytes of replayed updates are gathered before they are queued for the writer.
pub(super) const REPLAY_BATCH: usize = 256 << 10;

pub(super) const USER_CHUNK: &str = "user_message_chunk";

pub(super) const AGENT_CHUNK: &str = "agent_message_chunk";

pub(super) const THOUGHT_CHUNK: &str = "agent_thought_chunk";

/// Appends the line of a `session/update` made with the crate's types (replays of tool calls:
/// few, so the crate's way of building them costs nothing that matters).
pub(super) fn update_line(out: &mut Vec<u8>, session: &str, update: acp::SessionUpdate) {
    let notification = acp::SessionNotification::new(session.to_string(), update);
    let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": notification});
    serde_json::to_writer(&mut *out, &line).expect("values always serialize");
    out.push(b'\n');
}

/// A `session/update` notification of one text chunk, field for field as the crate writes it
/// (its JSON values keep the order fields are serialized in, so these are declared in that order;
/// a test compares the bytes).
#[derive(serde::Serialize)]
pub(super) struct TextUpdate<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: TextUpdateParams<'a>,
}

#[derive(serde::Serialize)]
pub(super) struct TextUpdateParams<'a> {
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    update: TextChunk<'a>,
}

#[derive(serde::Serialize)]
pub(super) struct TextChunk<'a> {
    #[serde(rename = "sessionUpdate")]
    session_update: &'static str,
    content: Text<'a>,
}

#[derive(serde::Serialize)]
pub(super) struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// Appends the line of a `session/update` of kind `kind` (a `*_message_chunk`) with `text`.
pub(super) fn text_update(out: &mut Vec<u8>, session: &str, kind: &'static str, text: &str) {
    let update = TextUpdate {
        jsonrpc: "2.0",
        method: "session/update",
        params: TextUpdateParams {
            session_id: session,
            update: TextChunk { session_update: kind, content: Text { kind: "text", text } },
        },
    };
    serde_json::to_writer(&mut *out, &update).expect("strings always serialize");
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use agent_client_protocol::{JsonRpcMessage, RawJsonRpcMessage};

    use super::*;

    /// The line the crate itself writes for a notification (its transport's serialization).
    fn crate_line(session: &str, update: acp::SessionUpdate) -> String {
        let untyped = acp::SessionNotification::new(session.to_string(), update)
            .to_untyped_message()
            .unwrap();
        let raw = RawJsonRpcMessage::notification(untyped.method, untyped.params).unwrap();
        serde_json::to_string(&raw).unwrap() + "\n"
    }

    #[test]
    fn replayed_updates_are_the_lines_the_crate_writes() {
        let session = "20261121-101500";
        for text in ["hi", "", "quote \" back\\slash\nnew line\ttab \u{1} é 😀 </script>"] {
            for (kind, update) in [
                (
                    USER_CHUNK,
                    acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(text.into())),
                ),
                (
                    AGENT_CHUNK,
                    acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text.into())),
                ),
            ] {
                let mut ours = Vec::new();
                text_update(&mut ours, session, kind, text);
                let theirs = crate_line(session, update);
                assert_eq!(String::from_utf8(ours).unwrap(), theirs);
            }
        }
    }
}
