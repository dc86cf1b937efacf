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
//! the client closes stdin, running turns are stopped (recorded as interrupted), prompts still in
//! line are kept as interrupted, and cca exits 0.

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

mod prompt;
mod queue;
mod replay;
mod sessions;

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
use prompt::{announce_commands, tool_call};
use queue::PromptQueue;

/// Sessions per `session/list` page.
const PAGE: usize = 100;

/// Serves one client until it closes stdin.
pub(crate) fn serve(settings: Settings, store: Store) -> Result<u8> {
    let handshake = Arc::new(wire::Handshake::default());
    let incoming = wire::incoming(handshake.clone()).context("cannot read stdin")?;
    let (outgoing, writer) = wire::outgoing(handshake).context("cannot write stdout")?;
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
/// one came. (SIGKILL cannot be caught: then the engines end with cca, see `run::guard`.)
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
    sessions: Mutex<HashMap<String, ClientSession>>,
    turns: Mutex<Vec<JoinHandle<()>>>,
    /// Lines written past the crate: a replay's updates (see [`Acp::replay`]).
    direct: wire::Direct,
    /// The sessions' engines kept between prompts.
    warm: crate::warm::Warm,
}

/// A session this client opened: the choices it made, and the turns running in it.
#[derive(Default)]
struct ClientSession {
    engine: Option<String>,
    model: Option<String>,
    prompt: Option<String>,
    running: Vec<(u64, Cancel)>,
    line: Arc<PromptQueue>,
    /// The URIs the client sent as embedded resources: files it shares (see `content`).
    shared: std::collections::HashSet<String>,
    /// The MCP servers the client gave for the session (new, load, resume), for every turn.
    mcp_servers: Vec<McpServer>,
    /// A new session's header, until its first prompt writes it.
    unwritten: Option<transcript::Header>,
}

/// The numbers that tell running turns apart.
static NEXT_TURN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Acp {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, ClientSession>> {
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
