//! A prompt: its content read, queued behind the session's earlier prompts, asked as one turn on a
//! thread of its own, and its events forwarded to the client as `session/update`s; slash commands.

use super::*;
use crate::front::slash::{Input, command_or_message};

impl Acp {
    /// A prompt's question and attachments; the files it links are read here (see `content`).
    pub(super) fn content(
        &self,
        id: &str,
        blocks: &[acp::ContentBlock],
    ) -> Result<content::Prompt, RpcError> {
        // Only a link needs the session's folder (and a read of its transcript).
        let links = blocks.iter().any(|b| matches!(b, acp::ContentBlock::ResourceLink(_)));
        let unwritten =
            self.sessions().get(id).and_then(|o| o.unwritten.as_ref().map(|h| h.cwd.clone()));
        let cwd = match (links, unwritten) {
            (false, _) => String::new(),
            // A new session's header is not written before its first prompt.
            (true, Some(cwd)) => cwd,
            (true, None) => self.store.summarize(id).map_err(|e| rpc_error(&e))?.header.cwd,
        };
        let mut shared =
            std::mem::take(&mut self.sessions().entry(id.to_string()).or_default().shared);
        let cap = self.settings.input_cap();
        let read = content::read(blocks, std::path::Path::new(&cwd), &mut shared, cap);
        self.sessions().entry(id.to_string()).or_default().shared = shared;
        read
    }

    /// Starts a turn on a thread of its own; it answers the request when it ends.
    pub(super) fn prompt(
        self: &Arc<Self>,
        req: acp::PromptRequest,
        r: Responder<acp::PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), RpcError> {
        let id = match self.existing(&req.session_id) {
            Ok(id) => id,
            Err(e) => return r.respond_with_error(e),
        };
        let content::Prompt { query, attachments } = match self.content(&id, &req.prompt) {
            Ok(p) => p,
            Err(e) => return r.respond_with_error(e),
        };
        if let Err(e) = self.write_if_new(&id, &attachments) {
            return r.respond_with_error(rpc_error(&e));
        }
        let cancel = Cancel::new();
        let watch = watch_cancel_request(r.cancellation(), cancel.clone());
        let number = NEXT_TURN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // The place in line is taken here, on the protocol loop, so it is the order of arrival.
        let (line, ahead) = {
            let mut sessions = self.sessions();
            let open = sessions.entry(id.clone()).or_default();
            open.running.push((number, cancel.clone()));
            (open.line.clone(), open.line.join(number))
        };
        let (agent, queued) = (self.clone(), (line.clone(), id.clone()));
        let watch_over = watch.clone();
        let thread = std::thread::Builder::new().name(format!("turn {id}")).spawn(move || {
            if ahead > 0 {
                let (ahead, are) = match ahead {
                    1 => ("1 earlier prompt".to_string(), "is"),
                    n => (format!("{n} earlier prompts"), "are"),
                };
                Forward::new(&cx, &id)
                    .note(format!("Queued: {ahead} in this session {are} answered first.\n"));
            }
            let ask = Ask { target: Target::Session(id.clone()), query, attachments, wait: true };
            let answer = if line.wait(number, &cancel) {
                agent.answer(&id, &ask, &cx, &cancel)
            } else {
                // Stopped before its turn came. Unless the client cancelled this prompt alone,
                // every prompt ahead is stopping too: its place comes soon, and keeps the order.
                if cancel.requested() != Some(Stop::Request) {
                    line.wait(number, &Cancel::new());
                }
                Ok(match command_or_message(ask.query.clone()) {
                    // A command stopped before it ran is not run later.
                    Input::Command(_) => acp::PromptResponse::new(acp::StopReason::Cancelled),
                    // `//` at the start stands for one `/`, as when it is asked.
                    Input::Message(query) => {
                        agent.keep_unless_withdrawn(&id, &Ask { query, ..ask }, &cx, &cancel)
                    }
                })
            };
            line.answered(number);
            watch.store(true, std::sync::atomic::Ordering::SeqCst);
            if let Some(open) = agent.sessions().get_mut(&id) {
                open.running.retain(|(n, _)| *n != number);
            }
            // The client may be gone; there is no one left to tell. Answered before the next
            // prompt goes, so the responses come in the order the prompts did.
            let _ = r.respond_with_result(answer);
            line.leave(number);
        });
        match thread {
            Ok(handle) => {
                let mut turns = self.turns.lock().unwrap_or_else(|e| e.into_inner());
                turns.retain(|t| !t.is_finished());
                turns.push(handle);
                Ok(())
            }
            Err(e) => {
                watch_over.store(true, std::sync::atomic::Ordering::SeqCst);
                let (line, id) = queued;
                line.leave(number);
                if let Some(open) = self.sessions().get_mut(&id) {
                    open.running.retain(|(n, _)| *n != number);
                }
                Err(RpcError::internal_error().data(json!({"error": e.to_string()})))
            }
        }
    }

    /// One prompt: a slash command, or a turn.
    pub(super) fn answer(
        &self,
        id: &str,
        ask: &Ask,
        cx: &ConnectionTo<Client>,
        cancel: &Cancel,
    ) -> Result<acp::PromptResponse, RpcError> {
        let settings = self.settings_for(id);
        let mut forward = Forward::new(cx, id);
        let message = match command_or_message(ask.query.clone()) {
            Input::Command(command) => {
                let text = self
                    .command(&settings, id, &command, &mut forward, cancel)
                    .map_err(|e| rpc_error(&e))?;
                let text = acp::ContentChunk::new(text.into());
                forward.send(acp::SessionUpdate::AgentMessageChunk(text));
                return Ok(acp::PromptResponse::new(stop_reason(cancel)));
            }
            Input::Message(message) => message,
        };
        // `//` at the start stands for one `/`.
        let ask = &Ask { query: message, ..ask.clone() };
        match self.title_if_untitled(id, &ask.query, &mut forward, cancel) {
            Ok(()) => {}
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
                return Ok(self.keep_unless_withdrawn(id, ask, cx, cancel));
            }
            Err(e) => return Err(rpc_error(&e)),
        }
        let inbox = crate::steer::Inbox::new();
        match turn::ask_warm(&settings, &self.store, ask, &inbox, &self.warm, &mut forward, cancel)
        {
            Ok(outcome) => {
                if let Some(engine) = settings.engines.get(&outcome.engine) {
                    forward.send(acp::SessionUpdate::UsageUpdate(self.usage(engine, &outcome)));
                }
                match outcome.verdict {
                    Verdict::Answered => Ok(acp::PromptResponse::new(acp::StopReason::EndTurn)),
                    Verdict::Interrupted { .. } => {
                        Ok(acp::PromptResponse::new(acp::StopReason::Cancelled))
                    }
                    Verdict::Failed { reason, hint, .. } => Err(RpcError::new(-32603, reason.clone())
                        .data(json!({
                            "message": reason,
                            "hint": hint,
                            "kept": format!(
                                "the question is kept in session {} as not answered, and will not be sent again",
                                outcome.session
                            ),
                        }))),
                }
            }
            // Stopped before the question was recorded.
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
                Ok(self.keep_unless_withdrawn(id, ask, cx, cancel))
            }
            Err(e) => Err(rpc_error(&e)),
        }
    }

    /// A prompt stopped before its question (`ask`, a message, not a command) was recorded.
    /// One the client cancelled is withdrawn: nothing is kept. One stopped because the client
    /// went or a signal came is kept as asked and interrupted (the engine never runs): nothing
    /// a user sent is lost.
    pub(super) fn keep_unless_withdrawn(
        &self,
        id: &str,
        ask: &Ask,
        cx: &ConnectionTo<Client>,
        cancel: &Cancel,
    ) -> acp::PromptResponse {
        let cancelled = acp::PromptResponse::new(acp::StopReason::Cancelled);
        let Some(why) = cancel.requested().filter(|why| *why != Stop::Request) else {
            return cancelled;
        };
        let settings = self.settings_for(id);
        let mut forward = Forward::new(cx, id);
        // Long enough for the turns ahead of it to record their own ends; a turn in a
        // terminal may hold the session far longer.
        let patience = Duration::from_secs(10);
        if let Err(e) = turn::keep_unasked(&settings, &self.store, ask, why, patience, &mut forward)
        {
            say(&format!("cca: a prompt to session {id} was lost as the client went: {e:#}"));
        }
        cancelled
    }

    /// The session's figures as ACP means them: `used` the tokens of its live context as cca
    /// counts them for compaction (what the next turn carries, never only this turn's share),
    /// `size` the engine's budget for the model, `cost` the session's running total.
    fn usage(
        &self,
        engine: &crate::engine::EngineConfig,
        outcome: &turn::TurnResult,
    ) -> acp::UsageUpdate {
        let live = self.store.summarize_unlocked(&outcome.session).map_or(0, |s| s.live.bytes());
        let cost = outcome.session_totals.cost_usd.map(|usd| acp::Cost::new(usd, "USD"));
        acp::UsageUpdate::new(engine.tokens(live), engine.budget(outcome.model.as_deref()))
            .cost(cost)
    }

    /// `/clear`, `/compact`, `/fork [N]` (`command` without its `/`): what happened, in a
    /// sentence. Another word is refused as chat refuses it, never sent as a question.
    pub(super) fn command(
        &self,
        settings: &Settings,
        id: &str,
        command: &str,
        forward: &mut Forward,
        cancel: &Cancel,
    ) -> Result<String> {
        let mut words = command.split_whitespace();
        match words.next().unwrap_or("") {
            "clear" => session::clear(
                settings,
                &self.store,
                id,
                || say_waiting(id),
                |note| say(&format!("cca: {note}")),
            )
            .map(|cleared| match cleared {
                true => "Context cleared: the next question starts without the turns above (the \
                         transcript keeps them)."
                    .to_string(),
                false => "Nothing to clear: the next question starts afresh already.".to_string(),
            }),
            "compact" => self.compact(settings, id, forward, cancel),
            "fork" => {
                let at = match words.next().map(str::parse::<u64>) {
                    None => None,
                    Some(Ok(n)) => Some(n),
                    Some(Err(_)) => {
                        return Err(Failure::usage("`/fork N` takes a number of exchanges").into());
                    }
                };
                session::fork(settings, &self.store, id, at, || say_waiting(id)).map(|new| {
                    self.sessions().entry(new.clone()).or_default();
                    format!("Forked into session {new}; load it to continue there.")
                })
            }
            other => Err(Failure::usage(format!("cca has no command `/{other}`"))
                .hint("its commands are /clear, /compact and /fork [N]; start a message with // to send one that begins with /")
                .into()),
        }
    }

    pub(super) fn compact(
        &self,
        settings: &Settings,
        id: &str,
        forward: &mut Forward,
        cancel: &Cancel,
    ) -> Result<String> {
        let keep = settings.compaction.keep_recent;
        match turn::compact(settings, &self.store, id, keep, forward, cancel) {
            Ok(done) => {
                let sentence = done.sentence(None);
                Ok(format!("{}{}.", sentence[..1].to_uppercase(), &sentence[1..]))
            }
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
                Ok("Compaction cancelled; nothing changed.".to_string())
            }
            Err(e) => Err(e.context("compaction failed; nothing changed")),
        }
    }

    /// A session an editor opened has no title until its first question gives it one.
    pub(super) fn title_if_untitled(
        &self,
        id: &str,
        query: &str,
        forward: &mut Forward,
        cancel: &Cancel,
    ) -> Result<()> {
        if !self.store.summarize(id)?.header.title.is_empty() {
            return Ok(());
        }
        let _lock = self.store.lock_unless(
            id,
            true,
            || forward.event(Event::Waiting { session: id }),
            || cancel.check(),
        )?;
        if self.store.summarize(id)?.header.title.is_empty() {
            self.store.set_title(id, crate::transcript::title_line(query))?;
        }
        Ok(())
    }
}

/// `$/cancel_request` for a prompt stops it as `session/cancel` does. The crate marks the
/// request; a watcher looks at the mark until the prompt is answered (set the returned flag).
pub(super) fn watch_cancel_request(
    request: agent_client_protocol::RequestCancellation,
    cancel: Cancel,
) -> Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::Ordering;
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let over = done.clone();
    let _ = std::thread::Builder::new().name("acp cancel watch".into()).spawn(move || {
        while !over.load(Ordering::SeqCst) {
            if request.is_cancelled() {
                if cancel.requested().is_none() {
                    cancel.stop(Stop::Request);
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    done
}

/// `cancelled` when the prompt was cancelled while a command ran, else `end_turn`.
pub(super) fn stop_reason(cancel: &Cancel) -> acp::StopReason {
    match cancel.requested() {
        Some(_) => acp::StopReason::Cancelled,
        None => acp::StopReason::EndTurn,
    }
}

/// Tells the client which slash commands a session takes.
pub(super) fn announce_commands(cx: &ConnectionTo<Client>, id: &str) -> Result<(), RpcError> {
    let commands = vec![
        acp::AvailableCommand::new("clear", "Clear the context: later questions start afresh"),
        acp::AvailableCommand::new("compact", "Summarise older turns now, keeping recent ones"),
        acp::AvailableCommand::new("fork", "Start a new session from the first N exchanges").input(
            acp::AvailableCommandInput::Unstructured(acp::UnstructuredCommandInput::new(
                "N: how many exchanges to keep (all by default)",
            )),
        ),
    ];
    cx.send_notification(acp::SessionNotification::new(
        id.to_string(),
        acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(commands)),
    ))
}

/// Forwards a turn's events to the client as `session/update` notifications.
pub(super) struct Forward<'a> {
    cx: &'a ConnectionTo<Client>,
    session: &'a str,
    /// Tool call ids this turn gave out: unique within the session (the turn's start time, then
    /// a count), so that an editor keeps each turn's calls apart.
    tools: ToolIds,
}

/// The ids of a turn's tool calls, and those announced and not yet settled, oldest first (an
/// engine settles its calls in the order it made them).
pub(super) struct ToolIds {
    turn: String,
    count: u64,
    started: VecDeque<String>,
}

impl ToolIds {
    fn new(session: &str) -> ToolIds {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        ToolIds { turn: format!("{session}-tool-{now}"), count: 0, started: VecDeque::new() }
    }

    fn next(&mut self) -> String {
        self.count += 1;
        format!("{}-{}", self.turn, self.count)
    }
}

impl<'a> Forward<'a> {
    fn new(cx: &'a ConnectionTo<Client>, session: &'a str) -> Forward<'a> {
        Forward { cx, session, tools: ToolIds::new(session) }
    }

    fn send(&self, update: acp::SessionUpdate) {
        // A client that went away is noticed by the protocol loop; the turn is stopped there.
        let _ = self
            .cx
            .send_notification(acp::SessionNotification::new(self.session.to_string(), update));
    }

    fn note(&self, text: String) {
        self.send(acp::SessionUpdate::AgentThoughtChunk(acp::ContentChunk::new(text.into())));
    }

    /// A tool call starts: announced as in progress, with what it was asked.
    fn tool_started(&mut self, call: &ToolCall) {
        let id = self.tools.next();
        self.tools.started.push_back(id.clone());
        self.send(acp::SessionUpdate::ToolCall(
            acp::ToolCall::new(id, call.line())
                .kind(tool_kind(call))
                .status(acp::ToolCallStatus::InProgress)
                .raw_input(Some(json!({"name": call.name, "input": call.input}))),
        ));
    }

    /// A tool call's outcome: the update of the call announced first (or, from an engine that
    /// never announced it, a call of its own).
    fn tool(&mut self, call: &ToolCall) {
        let fields = acp::ToolCallUpdateFields::new()
            .status(tool_status(call))
            .title(call.summary())
            .content(tool_content(call))
            .raw_output(Some(call.to_json()));
        match self.tools.started.pop_front() {
            Some(id) => {
                self.send(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(id, fields)))
            }
            None => {
                let id = self.tools.next();
                self.send(acp::SessionUpdate::ToolCall(tool_call(id, call)));
            }
        }
    }
}

/// A settled call as one `tool_call`: for a replay, or an engine that did not announce it.
pub(super) fn tool_call(id: String, call: &ToolCall) -> acp::ToolCall {
    acp::ToolCall::new(id, call.summary())
        .kind(tool_kind(call))
        .status(tool_status(call))
        .content(tool_content(call))
        .raw_input(Some(json!({"name": call.name, "input": call.input})))
        .raw_output(Some(call.to_json()))
}

pub(super) fn tool_kind(call: &ToolCall) -> acp::ToolKind {
    let name = call.name.to_lowercase();
    if name.contains("search") {
        acp::ToolKind::Search
    } else if name.contains("fetch") || call.input.starts_with("http") {
        acp::ToolKind::Fetch
    } else {
        acp::ToolKind::Other
    }
}

pub(super) fn tool_status(call: &ToolCall) -> acp::ToolCallStatus {
    match call.status {
        ToolStatus::Ran => acp::ToolCallStatus::Completed,
        ToolStatus::Refused | ToolStatus::Failed => acp::ToolCallStatus::Failed,
    }
}

/// What came of a call, as the editor shows it: the sources a search returned, each a link,
/// or why it failed.
pub(super) fn tool_content(call: &ToolCall) -> Vec<acp::ToolCallContent> {
    match (&call.reason, call.status) {
        (Some(reason), ToolStatus::Refused | ToolStatus::Failed) => {
            vec![acp::ContentBlock::from(reason.clone()).into()]
        }
        _ => call
            .sources
            .iter()
            .map(|s| {
                acp::ContentBlock::ResourceLink(
                    acp::ResourceLink::new(s.title.clone(), s.url.clone()).title(s.title.clone()),
                )
                .into()
            })
            .collect(),
    }
}

impl Observer for Forward<'_> {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Waiting { session } => self.note(format!(
                "Session {session} is busy: another cca is answering in it; waiting for it to finish…\n"
            )),
            Event::Notice { level, text } if level >= Level::Info => self.note(format!("{text}\n")),
            Event::Retry(note) => self.note(format!("{note}\n")),
            Event::Text(text) => self.send(acp::SessionUpdate::AgentMessageChunk(
                acp::ContentChunk::new(text.into()),
            )),
            Event::ToolStarted(call) => self.tool_started(call),
            Event::Tool(call) => self.tool(call),
            // A steer sent with `cca steer` while the editor's turn runs: shown where the engine
            // took it, as the user's words, so the editor's view matches the transcript.
            Event::Steer(Steered::Queued(text)) => self.note(format!("Steer queued: {text}\n")),
            Event::Steer(Steered::Taken(text)) => self.send(acp::SessionUpdate::UserMessageChunk(
                acp::ContentChunk::new(text.into()),
            )),
            Event::Steer(Steered::NotTaken(text)) => {
                self.note(format!("Steer not taken (kept, not sent again): {text}\n"))
            }
            Event::EngineOutput(bytes) => {
                let _ = std::io::stderr().write_all(bytes);
            }
            Event::Notice { .. }
            | Event::Recorded { .. }
            | Event::Started { .. }
            | Event::Stopping => {}
        }
    }
}
