//! Sessions as the client opens them: new, load, resume, fork, list, and their options (engine,
//! model, system prompt), each a cca session with its transcript.

use super::*;

impl Acp {
    pub(super) fn new_session(
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

    pub(super) fn load_session(
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

    pub(super) fn resume_session(
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
    pub(super) fn open_unwritten(
        &self,
        now: &chrono::DateTime<chrono::Utc>,
        header: transcript::Header,
        mcp_servers: Vec<McpServer>,
    ) -> String {
        let mut sessions = self.sessions();
        let stamp = now.format("%Y%m%d-%H%M%S").to_string();
        let id = self.store.free_id(&stamp, |id| sessions.contains_key(id));
        let unwritten = Some(transcript::Header { id: id.clone(), ..header });
        sessions.insert(
            id.clone(),
            ClientSession { unwritten, mcp_servers, ..ClientSession::default() },
        );
        id
    }

    pub(super) fn fork(
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
    pub(super) fn list_sessions(
        &self,
        req: acp::ListSessionsRequest,
    ) -> Result<acp::ListSessionsResponse, RpcError> {
        let mut listed = self.store.listing().map_err(|e| rpc_error(&e))?;
        listed.retain(|l| l.unreadable.is_none());
        if let Some(cwd) = &req.cwd {
            listed.retain(|l| std::path::Path::new(&l.cwd) == cwd.as_path());
        }
        store::newest_first(&mut listed);
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
                    // A title edited by hand or imported is shown on one line, as cca writes one.
                    .title((!l.title.is_empty()).then(|| transcript::one_line(&l.title, 200)))
                    .updated_at((!l.last_activity.is_empty()).then(|| l.last_activity.clone()))
            })
            .collect();
        let next = (end < listed.len()).then(|| end.to_string());
        Ok(acp::ListSessionsResponse::new(sessions).next_cursor(next))
    }

    /// A session's header: a new session's as it will be written, else the file's.
    pub(super) fn header(&self, id: &str) -> Result<transcript::Header> {
        let unwritten = self.sessions().get(id).and_then(|o| o.unwritten.clone());
        match unwritten {
            Some(header) => Ok(header),
            None => Ok(self.store.summarize(id)?.header),
        }
    }

    /// The config options of a session: engine, model and prompt, each with its current value.
    pub(super) fn options(&self, id: &str) -> Result<Vec<acp::SessionConfigOption>> {
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
        let mut prompts = crate::prompt::choices(self.store.prompt_names().unwrap_or_default());
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

    pub(super) fn set_option(
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
    pub(super) fn write_if_new(&self, id: &str, attachments: &[Attachment]) -> Result<()> {
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
}

/// The MCP servers a client gave, as the engines take them.
pub(super) fn mcp_servers(given: &[acp::McpServer]) -> Vec<McpServer> {
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
pub(super) fn usable_cwd(cwd: &std::path::Path) -> Result<(), RpcError> {
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
pub(super) const DEFAULT_MODEL: &str = "default";

pub(super) fn dedup(values: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    values.retain(|v| seen.insert(v.clone()));
}
