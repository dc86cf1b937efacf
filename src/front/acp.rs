//! The ACP front end (`cca acp`): cca as an agent of the Agent Client Protocol, JSON-RPC 2.0 on
//! stdin and stdout, for editors (Zed, JetBrains, Neovim) and command-line clients (`acpx`).
//!
//! An ACP session is a cca session: the same transcript, the same lock, the same id, so a session
//! an editor started continues with `,` in a terminal and the other way round. A `session/prompt`
//! is one `turn::ask` on a thread of its own with its own [`Cancel`], and its events go to the
//! client as `session/update` notifications; `session/cancel` stops that cancel. The protocol
//! layer (`agent-client-protocol`) runs on a small executor on the main thread and never waits
//! for a turn, so several sessions answer at once and a cancel arrives while a turn runs.
//!
//! stdout carries protocol messages only; diagnostics and the engines' stderr go to stderr. When
//! the client closes stdin, running turns are stopped (recorded as interrupted) and cca exits 0.

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error as RpcError};
use anyhow::{Context, Result};
use serde_json::json;

use super::{content, wire};
use crate::call::Verdict;
use crate::config::{PromptChoice, Settings, Source, Sourced};
use crate::engine::{McpServer, ToolCall, ToolStatus};
use crate::error::{Failure, exit};
use crate::front::terminal::{say, say_waiting};
use crate::run::{Cancel, Interrupted, Stop};
use crate::session;
use crate::steer::Steered;
use crate::store::{self, Store};
use crate::transcript::{self, Kind};
use crate::turn::{self, Ask, Attachment, Event, Level, Observer, Target};

/// Sessions per `session/list` page.
const PAGE: usize = 100;

/// Serves one client until it closes stdin.
pub fn serve(settings: Settings, store: Store) -> Result<u8> {
    let incoming = wire::incoming().context("cannot read stdin")?;
    let (outgoing, writer) = wire::outgoing().context("cannot write stdout")?;
    let agent = Arc::new(Acp {
        settings,
        store,
        sessions: Mutex::default(),
        turns: Mutex::default(),
        direct: outgoing.direct(),
        warm: crate::warm::Warm::new(),
    });
    let (end, ended) = futures::channel::oneshot::channel();
    let signalled = stop_on_signals(agent.clone(), end)?;
    let incoming = futures::StreamExt::take_until(incoming, ended);
    let transport = agent_client_protocol::Lines::new(outgoing, incoming);
    let served = futures::executor::block_on(connect(agent.clone(), transport));
    // The client is gone: whatever still runs is stopped, and recorded as interrupted.
    agent.stop_all(Stop::Closed);
    let turns = std::mem::take(&mut *agent.turns.lock().unwrap_or_else(|e| e.into_inner()));
    for turn in turns {
        let _ = turn.join();
    }
    // No engine outlives the client.
    agent.warm.end_all();
    writer.finish();
    let signal = *signalled.lock().unwrap_or_else(|e| e.into_inner());
    match (served, signal) {
        (_, Some(signal)) => Ok(crate::run::signal_exit_code(signal)),
        (Ok(()), None) => Ok(exit::OK),
        (Err(e), None) => Err(anyhow::anyhow!("the ACP connection failed: {e}")),
    }
}

/// What the client reads from: its lines, until a signal ends serving.
type Incoming = futures::stream::TakeUntil<wire::Incoming, futures::channel::oneshot::Receiver<()>>;

/// Editors end their agent with SIGTERM or SIGHUP (a closed terminal), and Ctrl-C where it runs
/// in one is SIGINT: each stops every running turn at once (recorded as interrupted, with what
/// arrived), and ends serving as a closed stdin does, through `end`. Returns the signal, once
/// one came. (SIGKILL cannot be caught: then the engines end with cca, see `run::launch`.)
fn stop_on_signals(
    agent: Arc<Acp>,
    end: futures::channel::oneshot::Sender<()>,
) -> Result<Arc<Mutex<Option<i32>>>> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP, SIGINT])
        .context("cannot install signal handlers")?;
    let signalled = Arc::new(Mutex::new(None));
    let seen = signalled.clone();
    std::thread::Builder::new()
        .name("acp signals".into())
        .spawn(move || {
            let mut end = Some(end);
            for signal in signals.forever() {
                seen.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert(signal);
                agent.stop_all(Stop::Signal(signal));
                if let Some(end) = end.take() {
                    let _ = end.send(());
                }
            }
        })
        .context("cannot listen for signals")?;
    Ok(signalled)
}

/// The handlers, one per method; the crate answers unknown methods (-32601), malformed JSON
/// (-32700) and params that do not parse (-32602) on its own and keeps serving.
async fn connect(
    agent: Arc<Acp>,
    transport: agent_client_protocol::Lines<wire::Outgoing, Incoming>,
) -> Result<(), RpcError> {
    let (a1, a2, a3, a4, a5, a6, a7, a8, a9) = (
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
        agent.clone(),
    );
    Agent
        .v1()
        .name("cca")
        .on_receive_request(
            async move |_: acp::InitializeRequest, r: Responder<acp::InitializeResponse>, _cx| {
                r.respond(initialize())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            // cca asks for no authentication (it advertises no methods); a client that
            // authenticates anyway is told it is done.
            async move |_: acp::AuthenticateRequest,
                        r: Responder<acp::AuthenticateResponse>,
                        _cx: ConnectionTo<Client>| {
                r.respond(acp::AuthenticateResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::NewSessionRequest,
                        r: Responder<acp::NewSessionResponse>,
                        cx: ConnectionTo<Client>| { a1.new_session(req, r, &cx) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::LoadSessionRequest,
                        r: Responder<acp::LoadSessionResponse>,
                        cx: ConnectionTo<Client>| { a2.load_session(req, r, &cx) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::ResumeSessionRequest,
                        r: Responder<acp::ResumeSessionResponse>,
                        cx: ConnectionTo<Client>| { a3.resume_session(req, r, &cx) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::ListSessionsRequest,
                        r: Responder<acp::ListSessionsResponse>,
                        _cx: ConnectionTo<Client>| {
                r.respond_with_result(a4.list_sessions(req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::ForkSessionRequest,
                        r: Responder<acp::ForkSessionResponse>,
                        cx: ConnectionTo<Client>| { a5.fork(req, r, &cx) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::SetSessionConfigOptionRequest,
                        r: Responder<acp::SetSessionConfigOptionResponse>,
                        _cx: ConnectionTo<Client>| {
                r.respond_with_result(a6.set_option(req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::PromptRequest,
                        r: Responder<acp::PromptResponse>,
                        cx: ConnectionTo<Client>| { a7.prompt(req, r, cx) },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: acp::CloseSessionRequest,
                        r: Responder<acp::CloseSessionResponse>,
                        _cx: ConnectionTo<Client>| {
                a8.cancel(&req.session_id);
                a8.warm.end(&req.session_id.0);
                r.respond(acp::CloseSessionResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: acp::CancelNotification, _cx: ConnectionTo<Client>| {
                a9.cancel(&n.session_id);
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(transport)
        .await
}

/// What cca is and can do.
fn initialize() -> acp::InitializeResponse {
    let sessions = acp::SessionCapabilities::new()
        .list(acp::SessionListCapabilities::new())
        .resume(acp::SessionResumeCapabilities::new())
        .close(acp::SessionCloseCapabilities::new())
        .fork(acp::SessionForkCapabilities::new());
    // claude and gemini both take MCP servers over HTTP and SSE as well as stdio.
    let capabilities = acp::AgentCapabilities::new()
        .load_session(true)
        .mcp_capabilities(acp::McpCapabilities::new().http(true).sse(true))
        .prompt_capabilities(acp::PromptCapabilities::new().embedded_context(true).image(true))
        .session_capabilities(sessions);
    acp::InitializeResponse::new(agent_client_protocol::schema::ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .agent_info(
            acp::Implementation::new("cca", env!("CARGO_PKG_VERSION")).title("cca".to_string()),
        )
}

/// The agent: the settings and store it started with, and the sessions this client opened.
struct Acp {
    settings: Settings,
    store: Store,
    sessions: Mutex<HashMap<String, Open>>,
    turns: Mutex<Vec<JoinHandle<()>>>,
    /// Lines written past the crate: a replay's updates (see [`Acp::replay`]).
    direct: wire::Direct,
    /// The sessions' engines kept between prompts.
    warm: crate::warm::Warm,
}

/// A session this client opened: the choices it made, and the turns running in it.
#[derive(Default)]
struct Open {
    engine: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
    running: Vec<(u64, Cancel)>,
    line: Arc<Line>,
    /// The URIs the client sent as embedded resources: files it shares (see `content`).
    shared: std::collections::HashSet<String>,
    /// The MCP servers the client gave for the session (new, load, resume), for every turn.
    mcp_servers: Vec<McpServer>,
    /// A new session's header, until its first prompt writes it.
    unwritten: Option<transcript::Header>,
}

/// The prompts of one session, in the order they arrived: a prompt sent while another is
/// answered is a turn of its own, asked once every prompt before it has its answer. (The
/// session lock alone would not do: its waiters are not served in order.)
#[derive(Default)]
struct Line {
    /// Prompts in line, and whether each is answered already (it leaves once its response is
    /// out).
    waiting: Mutex<VecDeque<(u64, bool)>>,
    moved: Condvar,
}

impl Line {
    fn waiting(&self) -> MutexGuard<'_, VecDeque<(u64, bool)>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes a place at the end of the line; returns how many prompts are ahead and not yet
    /// answered (one whose response is on its way is not worth a word of waiting).
    fn join(&self, turn: u64) -> usize {
        let mut waiting = self.waiting();
        let ahead = waiting.iter().filter(|(_, answered)| !answered).count();
        waiting.push_back((turn, false));
        ahead
    }

    /// `turn` has its answer; its response goes out next.
    fn answered(&self, turn: u64) {
        for (t, answered) in self.waiting().iter_mut() {
            if *t == turn {
                *answered = true;
            }
        }
    }

    /// Waits until `turn` is first in line, or its prompt is cancelled (`false`: it leaves).
    fn wait(&self, turn: u64, cancel: &Cancel) -> bool {
        let mut waiting = self.waiting();
        loop {
            if cancel.requested().is_some() {
                return false;
            }
            if waiting.front().map(|(t, _)| *t) == Some(turn) {
                return true;
            }
            // A cancel does not signal the line; it is seen within this period.
            waiting = self
                .moved
                .wait_timeout(waiting, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// `turn` leaves the line, answered or cancelled; the next one goes.
    fn leave(&self, turn: u64) {
        self.waiting().retain(|(t, _)| *t != turn);
        self.moved.notify_all();
    }
}

/// The numbers that tell running turns apart.
static NEXT_TURN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Acp {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Open>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The settings a session's turns use: the choices the client made win, as flags do.
    fn settings_for(&self, id: &str) -> Settings {
        let mut settings = self.settings.clone();
        if let Some(open) = self.sessions().get(id) {
            let flag = |value: &String| Sourced { value: value.clone(), source: Source::Flag };
            if let Some(engine) = &open.engine {
                settings.engine = Some(flag(engine));
            }
            if let Some(model) = &open.model {
                settings.model = Some(flag(model));
            }
            if let Some(prompt) = &open.prompt {
                settings.prompt =
                    Sourced { value: PromptChoice::Name(prompt.clone()), source: Source::Flag };
            }
            settings.mcp_servers = open.mcp_servers.clone();
        }
        settings
    }

    /// The id of a session in the store, exactly as given (no prefixes over ACP).
    fn existing(&self, id: &acp::SessionId) -> Result<String, RpcError> {
        let id = id.0.to_string();
        let unwritten = || self.sessions().get(&id).is_some_and(|o| o.unwritten.is_some());
        if store::validate_id(&id).is_ok()
            && (self.store.session_path(&id).is_file() || unwritten())
        {
            Ok(id)
        } else {
            Err(RpcError::from(acp::Error::session_not_found(id.clone())).data(json!({
                "message": format!("no session `{id}`"),
                "hint": "list sessions with `session/list` or `cca sessions`",
            })))
        }
    }

    fn new_session(
        &self,
        req: acp::NewSessionRequest,
        r: Responder<acp::NewSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), RpcError> {
        if let Err(e) = usable_cwd(&req.cwd) {
            return r.respond_with_error(e);
        }
        // Nothing is written until the first prompt: a thread opened and left leaves nothing.
        let now = self.settings.now();
        let header = session::new_header(
            &self.settings,
            &self.store,
            &now,
            "",
            &req.cwd.display().to_string(),
        );
        let header = match header {
            Ok(header) => header,
            Err(e) => return r.respond_with_error(rpc_error(&e)),
        };
        let id = self.open_unwritten(&now, header, mcp_servers(&req.mcp_servers));
        let options = self.options(&id).map_err(|e| rpc_error(&e));
        r.respond_with_result(
            options.map(|o| acp::NewSessionResponse::new(id.clone()).config_options(o)),
        )?;
        announce_commands(cx, &id)
    }

    fn load_session(
        &self,
        req: acp::LoadSessionRequest,
        r: Responder<acp::LoadSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), RpcError> {
        let id = match usable_cwd(&req.cwd).and_then(|()| self.existing(&req.session_id)) {
            Ok(id) => id,
            Err(e) => return r.respond_with_error(e),
        };
        if let Err(e) = self.replay(&id) {
            return r.respond_with_error(rpc_error(&e));
        }
        self.sessions().entry(id.clone()).or_default().mcp_servers = mcp_servers(&req.mcp_servers);
        let options = self.options(&id).map_err(|e| rpc_error(&e));
        announce_commands(cx, &id)?;
        r.respond_with_result(options.map(|o| acp::LoadSessionResponse::new().config_options(o)))
    }

    fn resume_session(
        &self,
        req: acp::ResumeSessionRequest,
        r: Responder<acp::ResumeSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), RpcError> {
        let id = match usable_cwd(&req.cwd).and_then(|()| self.existing(&req.session_id)) {
            Ok(id) => id,
            Err(e) => return r.respond_with_error(e),
        };
        self.sessions().entry(id.clone()).or_default().mcp_servers = mcp_servers(&req.mcp_servers);
        let options = self.options(&id).map_err(|e| rpc_error(&e));
        announce_commands(cx, &id)?;
        r.respond_with_result(options.map(|o| acp::ResumeSessionResponse::new().config_options(o)))
    }

    /// Opens a session that is not written yet, under a free id from `now`; returns the id.
    fn open_unwritten(
        &self,
        now: &chrono::DateTime<chrono::Utc>,
        header: transcript::Header,
        mcp_servers: Vec<McpServer>,
    ) -> String {
        let mut sessions = self.sessions();
        let stamp = now.format("%Y%m%d-%H%M%S").to_string();
        let id = self.store.free_id(&stamp, |id| sessions.contains_key(id));
        let unwritten = Some(transcript::Header { id: id.clone(), ..header });
        sessions.insert(id.clone(), Open { unwritten, mcp_servers, ..Open::default() });
        id
    }

    fn fork(
        &self,
        req: acp::ForkSessionRequest,
        r: Responder<acp::ForkSessionResponse>,
        cx: &ConnectionTo<Client>,
    ) -> Result<(), RpcError> {
        let source = match usable_cwd(&req.cwd).and_then(|()| self.existing(&req.session_id)) {
            Ok(id) => id,
            Err(e) => return r.respond_with_error(e),
        };
        let servers = mcp_servers(&req.mcp_servers);
        let unwritten = self.sessions().get(&source).and_then(|o| o.unwritten.clone());
        let id = match unwritten {
            // A session with nothing in it yet forks into another such session.
            Some(header) => {
                let now = self.settings.now();
                let created = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
                self.open_unwritten(&now, transcript::Header { created, ..header }, servers)
            }
            None => match session::fork(&self.settings, &self.store, &source, None, || {
                say_waiting(&source)
            }) {
                Ok(id) => {
                    self.sessions().entry(id.clone()).or_default().mcp_servers = servers;
                    id
                }
                Err(e) => return r.respond_with_error(rpc_error(&e)),
            },
        };
        let options = self.options(&id).map_err(|e| rpc_error(&e));
        r.respond_with_result(
            options.map(|o| acp::ForkSessionResponse::new(id.clone()).config_options(o)),
        )?;
        announce_commands(cx, &id)
    }

    /// Every session, newest first, a page at a time; the cursor is where the next page starts.
    fn list_sessions(
        &self,
        req: acp::ListSessionsRequest,
    ) -> Result<acp::ListSessionsResponse, RpcError> {
        let mut listed = self.store.listing().map_err(|e| rpc_error(&e))?;
        listed.retain(|l| l.unreadable.is_none());
        if let Some(cwd) = &req.cwd {
            listed.retain(|l| std::path::Path::new(&l.cwd) == cwd.as_path());
        }
        listed.sort_by_cached_key(|l| {
            std::cmp::Reverse((l.last_activity.clone(), store::sort_key(&l.id)))
        });
        let start = match req.cursor.as_deref() {
            None => 0,
            Some(cursor) => cursor.parse::<usize>().map_err(|_| {
                RpcError::invalid_params()
                    .data(json!({"cursor": cursor, "error": "not a cursor cca gave"}))
            })?,
        };
        let end = listed.len().min(start.saturating_add(PAGE));
        let page = listed.get(start..end).unwrap_or_default();
        let sessions = page
            .iter()
            .map(|l| {
                acp::SessionInfo::new(l.id.clone(), PathBuf::from(&l.cwd))
                    .title((!l.title.is_empty()).then(|| l.title.clone()))
                    .updated_at((!l.last_activity.is_empty()).then(|| l.last_activity.clone()))
            })
            .collect();
        let next = (end < listed.len()).then(|| end.to_string());
        Ok(acp::ListSessionsResponse::new(sessions).next_cursor(next))
    }

    /// A session's header: a new session's as it will be written, else the file's.
    fn header(&self, id: &str) -> Result<transcript::Header> {
        let unwritten = self.sessions().get(id).and_then(|o| o.unwritten.clone());
        match unwritten {
            Some(header) => Ok(header),
            None => Ok(self.store.summarize(id)?.header),
        }
    }

    /// The config options of a session: engine, model and prompt, each with its current value.
    fn options(&self, id: &str) -> Result<Vec<acp::SessionConfigOption>> {
        let settings = self.settings_for(id);
        let header = self.header(id)?;
        let (engine, model) = session::engine_and_model(&settings, &header, false)?;
        let prompt = session::load_prompt(&settings, &self.store, Some(&header))?;
        let select = |values: Vec<String>| {
            values
                .into_iter()
                .map(|v| acp::SessionConfigSelectOption::new(v.clone(), v))
                .collect::<Vec<_>>()
        };
        // Engines that can run here (and the session's own, whatever it is).
        let engines: Vec<String> = settings
            .engines
            .values()
            .filter(|e| e.name == engine.name || crate::run::locate(&settings, e).is_ok())
            .map(|e| e.name.clone())
            .collect();
        let current_model = model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string());
        let mut models = vec![DEFAULT_MODEL.to_string()];
        models.extend(engine.spec.models.iter().map(|m| m.to_string()));
        models.extend(engine.model.iter().cloned());
        models.extend(engine.model_budgets.keys().cloned());
        models.extend(model.iter().cloned());
        dedup(&mut models);
        let mut prompts: Vec<String> = crate::prompt::builtin_names().map(str::to_string).collect();
        prompts.extend(self.store.prompt_names().unwrap_or_default());
        // cca's own prompt for summaries is not a system prompt for a conversation.
        prompts.retain(|p| p != crate::prompt::COMPACTION);
        prompts.push(prompt.name.clone());
        dedup(&mut prompts);
        Ok(vec![
            acp::SessionConfigOption::select(
                "engine",
                "Engine",
                engine.name.clone(),
                select(engines),
            )
            .description("The program that answers".to_string()),
            acp::SessionConfigOption::select("model", "Model", current_model, select(models))
                .category(acp::SessionConfigOptionCategory::Model)
                .description("Passed to the engine as is".to_string()),
            acp::SessionConfigOption::select(
                "prompt",
                "System prompt",
                prompt.name,
                select(prompts),
            )
            .description("A built-in prompt, or NAME.md under $CCA_HOME/prompts".to_string()),
        ])
    }

    fn set_option(
        &self,
        req: acp::SetSessionConfigOptionRequest,
    ) -> Result<acp::SetSessionConfigOptionResponse, RpcError> {
        let id = self.existing(&req.session_id)?;
        let acp::SessionConfigOptionValue::ValueId { value } = &req.value else {
            return Err(RpcError::invalid_params().data(json!({"error": "a value id is expected"})));
        };
        let value = value.0.to_string();
        let bad = |what: String| RpcError::invalid_params().data(json!({"error": what}));
        match req.config_id.0.as_ref() {
            "engine" => {
                if !self.settings.engines.contains_key(&value) {
                    return Err(bad(format!("there is no engine `{value}`")));
                }
                // A model is one engine's name for it: another engine starts with its default.
                let (settings, header) = (self.settings_for(&id), self.header(&id));
                let current = header
                    .and_then(|h| session::engine_and_model(&settings, &h, false))
                    .map_err(|e| rpc_error(&e))?
                    .0
                    .name
                    .clone();
                let mut sessions = self.sessions();
                let open = sessions.entry(id.clone()).or_default();
                if current != value {
                    open.model = None;
                }
                open.engine = Some(value);
            }
            "model" => {
                if value != DEFAULT_MODEL {
                    crate::engine::check_model(&value, "chosen by the editor")
                        .map_err(|e| bad(format!("{e:#}")))?;
                }
                let model = (value != DEFAULT_MODEL).then_some(value);
                self.sessions().entry(id.clone()).or_default().model = model;
            }
            "prompt" => {
                session::named_prompt(&self.store, &value).map_err(|e| bad(format!("{e:#}")))?;
                self.sessions().entry(id.clone()).or_default().prompt = Some(value);
            }
            other => {
                return Err(bad(format!("there is no option `{other}`: engine, model, prompt")));
            }
        }
        let options = self.options(&id).map_err(|e| rpc_error(&e))?;
        Ok(acp::SetSessionConfigOptionResponse::new(options))
    }

    /// A new session's file is written at its first prompt, unless the prompt is refused for
    /// its images (then nothing is left of it, as in a terminal).
    fn write_if_new(&self, id: &str, attachments: &[Attachment]) -> Result<()> {
        let settings = self.settings_for(id);
        let mut sessions = self.sessions();
        let Some(open) = sessions.get_mut(id) else { return Ok(()) };
        let Some(header) = &open.unwritten else { return Ok(()) };
        let (engine, _) = session::engine_and_model(&settings, header, false)?;
        turn::refuse_images(engine, attachments)?;
        if !self.store.create_session_as(id, &transcript::render_header(header))? {
            return Err(Failure::new(exit::ERROR, format!("a session {id} exists already"))
                .hint("start a new session: another cca took this id before the first prompt")
                .into());
        }
        open.unwritten = None;
        Ok(())
    }

    /// Stops every turn running in any session, unless it is stopping already.
    fn stop_all(&self, why: Stop) {
        for open in self.sessions().values() {
            for (_, cancel) in &open.running {
                if cancel.requested().is_none() {
                    cancel.stop(why);
                }
            }
        }
    }

    /// Stops every turn running in the session.
    fn cancel(&self, id: &acp::SessionId) {
        if let Some(open) = self.sessions().get(id.0.as_ref()) {
            for (_, cancel) in &open.running {
                cancel.stop(Stop::Request);
            }
        }
    }

    /// A prompt's question and attachments; the files it links are read here (see `content`).
    fn content(&self, id: &str, blocks: &[acp::ContentBlock]) -> Result<content::Prompt, RpcError> {
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
        let cap = content::input_cap(&self.settings);
        let read = content::read(blocks, std::path::Path::new(&cwd), &mut shared, cap);
        self.sessions().entry(id.to_string()).or_default().shared = shared;
        read
    }

    /// Starts a turn on a thread of its own; it answers the request when it ends.
    fn prompt(
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
                Forward::new(&cx, &id).note(format!(
                    "Queued: {ahead} earlier prompt(s) in this session are answered first.\n"
                ));
            }
            let answer = if line.wait(number, &cancel) {
                agent.answer(&id, query, attachments, &cx, &cancel)
            } else {
                // Cancelled before its turn came: nothing was recorded, nothing ran.
                Ok(acp::PromptResponse::new(acp::StopReason::Cancelled))
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
    fn answer(
        &self,
        id: &str,
        query: String,
        attachments: Vec<Attachment>,
        cx: &ConnectionTo<Client>,
        cancel: &Cancel,
    ) -> Result<acp::PromptResponse, RpcError> {
        let settings = self.settings_for(id);
        let mut forward = Forward::new(cx, id);
        if let Some(reply) = self.command(&settings, id, &query, &mut forward, cancel) {
            let text = reply.map_err(|e| rpc_error(&e))?;
            forward
                .send(acp::SessionUpdate::AgentMessageChunk(acp::ContentChunk::new(text.into())));
            return Ok(acp::PromptResponse::new(stop_reason(cancel)));
        }
        match self.title_if_untitled(id, &query, &mut forward, cancel) {
            Ok(()) => {}
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
                return Ok(acp::PromptResponse::new(acp::StopReason::Cancelled));
            }
            Err(e) => return Err(rpc_error(&e)),
        }
        let ask = Ask { target: Target::Session(id.to_string()), query, attachments, wait: true };
        let inbox = crate::steer::Inbox::new();
        match turn::ask_warm(&settings, &self.store, &ask, &inbox, &self.warm, &mut forward, cancel)
        {
            Ok(outcome) => {
                if outcome.usage.input_tokens.is_some() || outcome.usage.cost_usd.is_some() {
                    let used = (outcome.usage.input_tokens.unwrap_or(0))
                        .saturating_add(outcome.usage.output_tokens.unwrap_or(0));
                    let size = settings
                        .engines
                        .get(&outcome.engine)
                        .map_or(0, |e| e.budget(outcome.model.as_deref()));
                    let cost = outcome.usage.cost_usd.map(|c| acp::Cost::new(c, "USD"));
                    forward.send(acp::SessionUpdate::UsageUpdate(
                        acp::UsageUpdate::new(used, size).cost(cost),
                    ));
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
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
                Ok(acp::PromptResponse::new(acp::StopReason::Cancelled))
            }
            Err(e) => Err(rpc_error(&e)),
        }
    }

    /// `/clear`, `/compact`, `/fork [N]`: what happened, in a sentence; `None` for a question.
    fn command(
        &self,
        settings: &Settings,
        id: &str,
        query: &str,
        forward: &mut Forward,
        cancel: &Cancel,
    ) -> Option<Result<String>> {
        let mut words = query.split_whitespace();
        let reply = match words.next()? {
            "/clear" => session::clear(
                settings,
                &self.store,
                id,
                || say_waiting(id),
                |note| say(&format!("cca: {note}")),
            )
            .map(|()| {
                "Context cleared: the next question starts without the turns above (the \
                 transcript keeps them)."
                    .to_string()
            }),
            "/compact" => self.compact(settings, id, forward, cancel),
            "/fork" => {
                let at = match words.next().map(str::parse::<u64>) {
                    None => None,
                    Some(Ok(n)) => Some(n),
                    Some(Err(_)) => {
                        return Some(Err(
                            Failure::usage("`/fork N` takes a number of exchanges").into()
                        ));
                    }
                };
                session::fork(settings, &self.store, id, at, || say_waiting(id)).map(|new| {
                    self.sessions().entry(new.clone()).or_default();
                    format!("Forked into session {new}; load it to continue there.")
                })
            }
            _ => return None,
        };
        Some(reply)
    }

    fn compact(
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
    fn title_if_untitled(
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
            self.store.set_title(id, query.lines().next().unwrap_or(""))?;
        }
        Ok(())
    }

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
    fn replay(&self, id: &str) -> Result<()> {
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
const REPLAY_BATCH: usize = 256 << 10;

const USER_CHUNK: &str = "user_message_chunk";
const AGENT_CHUNK: &str = "agent_message_chunk";
const THOUGHT_CHUNK: &str = "agent_thought_chunk";

/// Appends the line of a `session/update` made with the crate's types (replays of tool calls:
/// few, so the crate's way of building them costs nothing that matters).
fn update_line(out: &mut Vec<u8>, session: &str, update: acp::SessionUpdate) {
    let notification = acp::SessionNotification::new(session.to_string(), update);
    let line = json!({"jsonrpc": "2.0", "method": "session/update", "params": notification});
    serde_json::to_writer(&mut *out, &line).expect("values always serialize");
    out.push(b'\n');
}

/// A `session/update` notification of one text chunk, field for field as the crate writes it
/// (its JSON values keep the order fields are serialized in, so these are declared in that order;
/// a test compares the bytes).
#[derive(serde::Serialize)]
struct TextUpdate<'a> {
    jsonrpc: &'static str,
    method: &'static str,
    params: TextUpdateParams<'a>,
}

#[derive(serde::Serialize)]
struct TextUpdateParams<'a> {
    #[serde(rename = "sessionId")]
    session_id: &'a str,
    update: TextChunk<'a>,
}

#[derive(serde::Serialize)]
struct TextChunk<'a> {
    #[serde(rename = "sessionUpdate")]
    session_update: &'static str,
    content: Text<'a>,
}

#[derive(serde::Serialize)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

/// Appends the line of a `session/update` of kind `kind` (a `*_message_chunk`) with `text`.
fn text_update(out: &mut Vec<u8>, session: &str, kind: &'static str, text: &str) {
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

/// The MCP servers a client gave, as the engines take them.
fn mcp_servers(given: &[acp::McpServer]) -> Vec<McpServer> {
    let pairs = |headers: &[acp::HttpHeader]| {
        headers.iter().map(|h| (h.name.clone(), h.value.clone())).collect::<Vec<_>>()
    };
    given
        .iter()
        .filter_map(|server| match server {
            acp::McpServer::Stdio(s) => Some(McpServer::Stdio {
                name: s.name.clone(),
                command: s.command.display().to_string(),
                args: s.args.clone(),
                env: s.env.iter().map(|e| (e.name.clone(), e.value.clone())).collect(),
            }),
            acp::McpServer::Http(s) => Some(McpServer::Http {
                name: s.name.clone(),
                url: s.url.clone(),
                headers: pairs(&s.headers),
            }),
            acp::McpServer::Sse(s) => Some(McpServer::Sse {
                name: s.name.clone(),
                url: s.url.clone(),
                headers: pairs(&s.headers),
            }),
            _ => None,
        })
        .collect()
}

/// A session's working directory must be an absolute path to a directory (the spec asks for
/// an absolute one; a directory that is not there is a mistake worth telling at once).
fn usable_cwd(cwd: &std::path::Path) -> Result<(), RpcError> {
    let problem = if !cwd.is_absolute() {
        "is not an absolute path"
    } else if !cwd.is_dir() {
        "is not a directory"
    } else {
        return Ok(());
    };
    Err(RpcError::invalid_params().data(json!({
        "cwd": cwd,
        "error": format!("the working directory {} {problem}", cwd.display()),
    })))
}

/// The model value that means "the engine's own default".
const DEFAULT_MODEL: &str = "default";

fn dedup(values: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    values.retain(|v| seen.insert(v.clone()));
}

/// `$/cancel_request` for a prompt stops it as `session/cancel` does. The crate marks the
/// request; a watcher looks at the mark until the prompt is answered (set the returned flag).
fn watch_cancel_request(
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
fn stop_reason(cancel: &Cancel) -> acp::StopReason {
    match cancel.requested() {
        Some(_) => acp::StopReason::Cancelled,
        None => acp::StopReason::EndTurn,
    }
}

/// Tells the client which slash commands a session takes.
fn announce_commands(cx: &ConnectionTo<Client>, id: &str) -> Result<(), RpcError> {
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

/// An error as cca says it: the message, and the hint to act on.
fn rpc_error(e: &anyhow::Error) -> RpcError {
    let failure = e.chain().find_map(|c| c.downcast_ref::<Failure>());
    let message = format!("{e:#}");
    let code = match failure.map(|f| f.code) {
        Some(exit::USAGE) => -32602,
        _ => -32603,
    };
    RpcError::new(code, message.clone())
        .data(json!({"message": message, "hint": failure.and_then(|f| f.hint.clone())}))
}

/// Forwards a turn's events to the client as `session/update` notifications.
struct Forward<'a> {
    cx: &'a ConnectionTo<Client>,
    session: &'a str,
    /// Tool call ids this turn gave out: unique within the session (the turn's start time, then
    /// a count), so that an editor keeps each turn's calls apart.
    tools: ToolIds,
}

/// The ids of a turn's tool calls, and those announced and not yet settled, oldest first (an
/// engine settles its calls in the order it made them).
struct ToolIds {
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
fn tool_call(id: String, call: &ToolCall) -> acp::ToolCall {
    acp::ToolCall::new(id, call.summary())
        .kind(tool_kind(call))
        .status(tool_status(call))
        .content(tool_content(call))
        .raw_input(Some(json!({"name": call.name, "input": call.input})))
        .raw_output(Some(call.to_json()))
}

fn tool_kind(call: &ToolCall) -> acp::ToolKind {
    let name = call.name.to_lowercase();
    if name.contains("search") {
        acp::ToolKind::Search
    } else if name.contains("fetch") || call.input.starts_with("http") {
        acp::ToolKind::Fetch
    } else {
        acp::ToolKind::Other
    }
}

fn tool_status(call: &ToolCall) -> acp::ToolCallStatus {
    match call.status {
        ToolStatus::Ran => acp::ToolCallStatus::Completed,
        ToolStatus::Refused | ToolStatus::Failed => acp::ToolCallStatus::Failed,
    }
}

/// What came of a call, as the editor shows it: the sources a search returned, each a link,
/// or why it failed.
fn tool_content(call: &ToolCall) -> Vec<acp::ToolCallContent> {
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
