//! codex kept between turns: `codex app-server`, opened on a thread of its own and sent a
//! `turn/start` per message ([`super::SPEC`]'s `Keeping::Rpc`).

use serde_json::{Value, json};

use super::{SPEC, price, settle};
use crate::engine::{LineBuffer, Output, Paragraphs, ToolCall, ToolCalls, Usage, json_line};

/// `codex app-server` (0.169.0, its `generate-json-schema`): JSON lines without `jsonrpc`;
/// `initialize`, the `initialized` notification and `thread/start` open a thread (ephemeral:
/// codex keeps no rollout of it), or `thread/fork` opens one as a copy of the rollout cca wrote
/// of the live context (found by its id, as `exec resume` finds it; ephemeral too), which
/// [`super::tidy`] removes after the first turn; one `turn/start` per message. Not `thread/resume`: it
/// runs the thread on the model provider its rollout names, and cca does not know the user's.
pub(crate) static APP_SERVER: crate::engine::RpcSession = crate::engine::RpcSession {
    opening_lines: |cwd, resume| {
        let initialize = json!({"id": 0, "method": "initialize",
            "params": {"clientInfo": {"name": "cca", "version": env!("CARGO_PKG_VERSION")}}});
        let initialized = json!({"method": "initialized"});
        let open = match resume {
            // Without the turns in the answer: cca holds them.
            Some(rollout) => json!({"id": 1, "method": "thread/fork",
                "params": {"threadId": rollout, "cwd": cwd, "ephemeral": true,
                           "excludeTurns": true}}),
            None => json!({"id": 1, "method": "thread/start",
                "params": {"cwd": cwd, "ephemeral": true}}),
        };
        [initialize, initialized, open].iter().map(|l| format!("{l}\n")).collect()
    },
    session_of: |line| {
        let message: Value = serde_json::from_slice(line).ok()?;
        if message["id"] != 1 || message.get("method").is_some() {
            return None;
        }
        match message["result"]["thread"]["id"].as_str() {
            Some(id) => Some(Ok(id.to_string())),
            None => Some(Err(message["error"]["message"]
                .as_str()
                .unwrap_or("codex opened no thread")
                .to_string())),
        }
    },
    prompt_line: |id, thread, text, _images| {
        let line = json!({"id": id, "method": "turn/start",
            "params": {"threadId": thread, "input": [{"type": "text", "text": text}]}});
        format!("{line}\n")
    },
    first_prompt_id: 2,
    decoder: |model| Box::new(ServerDecoder::priced(model)),
};

/// Decodes what `codex app-server` writes for a turn: the answer's deltas, web searches and
/// commands as tool calls (as `exec --json` gives them, in its own names), the usage, and
/// `turn/completed`, which ends the answer.
#[derive(Debug, Default)]
pub(crate) struct ServerDecoder {
    lines: LineBuffer,
    paragraphs: Paragraphs,
    tools: ToolCalls,
    usage: Option<Usage>,
    /// The message of the last `error` notification codex does not retry.
    error: Option<String>,
    /// The model its usage is priced by: the one cca asked for, else the one the thread runs.
    model: Option<String>,
    /// The rollout of the live context the thread was forked from, until a turn ends.
    forked_from: Option<String>,
}

impl crate::engine::Decoder for ServerDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        LineBuffer::feed_to(self, |d| &mut d.lines, chunk, Self::line, out);
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        LineBuffer::finish_to(self, |d| &mut d.lines, Self::line, out);
        self.tools.flush(out);
        if let Some(error) = self.error.take() {
            out.push(Output::Error(error));
        }
    }

    fn stderr_noise(&self) -> Option<fn(&[u8]) -> bool> {
        SPEC.stderr_noise
    }
}

impl ServerDecoder {
    /// A decoder pricing the usage by `model`, if cca names one.
    pub(super) fn priced(model: Option<&str>) -> ServerDecoder {
        ServerDecoder { model: model.map(str::to_string), ..ServerDecoder::default() }
    }

    fn line(&mut self, line: &[u8], out: &mut Vec<Output>) {
        let Some(v) = json_line(line, out) else { return };
        let params = &v["params"];
        let item = &params["item"];
        match v["method"].as_str() {
            Some("thread/started") => {
                let thread = &params["thread"];
                // The thread's model: codex's default when cca names none.
                if self.model.is_none() {
                    self.model = thread["model"].as_str().map(str::to_string);
                }
                self.forked_from = thread["forkedFromId"].as_str().map(str::to_string);
            }
            Some("item/started") if item["type"] == "agentMessage" => self.paragraphs.new_message(),
            Some("item/started") => {
                if let Some(call) = server_tool_call(item) {
                    self.tools.started(item["id"].as_str().unwrap_or(""), call, out);
                }
            }
            Some("item/agentMessage/delta") => {
                self.paragraphs.text(params["delta"].as_str().unwrap_or(""), out);
            }
            Some("item/completed") if server_tool_call(item).is_some() => {
                let exec = json!({"status": item["status"], "exit_code": item["exitCode"],
                                  "aggregated_output": item["aggregatedOutput"]});
                let id = item["id"].as_str().unwrap_or("");
                self.tools.settled(id, |call| settle(call, &exec), out);
            }
            Some("thread/tokenUsage/updated") => {
                let last = &params["tokenUsage"]["last"];
                let usage = Usage {
                    input_tokens: last["inputTokens"].as_u64(),
                    cached_tokens: last["cachedInputTokens"].as_u64(),
                    output_tokens: last["outputTokens"].as_u64(),
                    cost_usd: None,
                };
                self.usage = Some(price::priced(self.model.as_deref(), usage));
            }
            Some("error") => {
                let message =
                    params["error"]["message"].as_str().unwrap_or("codex reported an error");
                if params["willRetry"] == true {
                    out.push(Output::Retry(message.to_string()));
                } else if let Some(earlier) = self.error.replace(message.to_string()) {
                    out.push(Output::Note(earlier));
                }
            }
            Some("turn/completed") => {
                self.tools.flush(out);
                // The rollout the thread was forked from, cca's, is removed now (`tidy`).
                if let Some(rollout) = self.forked_from.take() {
                    out.push(Output::Session(rollout));
                }
                let turn = &params["turn"];
                if turn["status"] == "failed" {
                    let message = turn["error"]["message"]
                        .as_str()
                        .map(str::to_string)
                        .or_else(|| self.error.clone())
                        .unwrap_or_else(|| "codex reported a failed turn".to_string());
                    if ["401 Unauthorized", "403 Forbidden"].iter().any(|s| message.contains(s)) {
                        out.push(Output::Refused(message.clone()));
                    }
                    out.push(Output::Error(message));
                }
                self.error = None;
                out.extend(self.usage.take().map(Output::Usage));
                // The next turn's text starts afresh.
                self.paragraphs = Paragraphs::default();
                out.push(Output::AnswerEnd);
            }
            // A refused `turn/start`: no turn, so no `turn/completed`.
            None if v.get("id").is_some() && v.get("error").is_some() => {
                let message = v["error"]["message"].as_str().unwrap_or("codex refused the turn");
                out.push(Output::Error(message.to_string()));
                out.push(Output::AnswerEnd);
            }
            _ => {}
        }
    }
}

/// A web search or a command of the app server as a tool call; `None` for the other items.
fn server_tool_call(item: &Value) -> Option<ToolCall> {
    let (name, input) = match item["type"].as_str()? {
        "webSearch" => ("web_search", json!({ "query": item["query"] })),
        "commandExecution" => ("command", json!({ "command": item["command"] })),
        _ => return None,
    };
    Some(ToolCall::new(name, &input))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::answer_text as text;

    fn tools(out: &[Output]) -> Vec<&ToolCall> {
        out.iter().filter_map(|o| if let Output::Tool(t) = o { Some(t) } else { None }).collect()
    }

    #[test]
    fn the_app_server_s_turn_is_an_answer_with_its_tools_and_usage_and_ends_the_answer() {
        // The shapes codex 0.169.0's app server wrote against the loopback Responses API.
        let lines = [
            r#"{"id":2,"result":{"turn":{"id":"t1","status":"inProgress","items":[]}}}"#,
            r#"{"method":"turn/started","params":{"threadId":"th","turn":{"id":"t1"}}}"#,
            r#"{"method":"item/started","params":{"item":{"type":"webSearch","id":"ws","query":"rust 1.89"}}}"#,
            r#"{"method":"item/completed","params":{"item":{"type":"webSearch","id":"ws","query":"rust 1.89"}}}"#,
            r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c1","command":"touch x","status":"inProgress"}}}"#,
            r#"{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"c1","command":"touch x","status":"failed","exitCode":1,"aggregatedOutput":"touch: cannot touch 'x': Read-only file system\n"}}}"#,
            r#"{"method":"item/started","params":{"item":{"type":"agentMessage","id":"m","text":""}}}"#,
            r#"{"method":"item/agentMessage/delta","params":{"itemId":"m","delta":"ECHO: "}}"#,
            r#"{"method":"item/agentMessage/delta","params":{"itemId":"m","delta":"q"}}"#,
            r#"{"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":10,"cachedInputTokens":4,"outputTokens":3}}}}"#,
            r#"{"method":"turn/completed","params":{"threadId":"th","turn":{"id":"t1","status":"completed"}}}"#,
        ];
        let out = crate::engine::decoded(
            ServerDecoder::default(),
            &lines.map(|l| format!("{l}\n")).concat(),
            17,
        );
        assert_eq!(text(&out), "ECHO: q");
        let lines: Vec<String> = tools(&out).iter().map(|t| t.summary()).collect();
        assert_eq!(
            lines,
            [
                "web_search: rust 1.89",
                "command (refused): touch x · the read-only sandbox kept it from writing"
            ]
        );
        let usage = Usage {
            input_tokens: Some(10),
            cached_tokens: Some(4),
            output_tokens: Some(3),
            cost_usd: None,
        };
        assert_eq!(out[out.len() - 2..], [Output::Usage(usage), Output::AnswerEnd]);
        let failed = r#"{"method":"turn/completed","params":{"turn":{"status":"failed","error":{"message":"unexpected status 401 Unauthorized"}}}}"#;
        let out = crate::engine::decoded(ServerDecoder::default(), &format!("{failed}\n"), 9);
        assert!(matches!(&out[0], Output::Refused(m) if m.contains("401")), "{out:?}");
        assert!(matches!(&out[1], Output::Error(_)) && out[2] == Output::AnswerEnd, "{out:?}");
    }

    #[test]
    fn the_app_server_opens_a_thread_and_takes_a_turn_per_message() {
        let lines = (APP_SERVER.opening_lines)(std::path::Path::new("/w"), None);
        let methods: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str::<Value>(l).unwrap()["method"].clone())
            .collect();
        assert_eq!(methods, ["initialize", "initialized", "thread/start"]);
        // With a rollout of the live context, the thread resumes it instead.
        let lines = (APP_SERVER.opening_lines)(std::path::Path::new("/w"), Some("th-0"));
        let resume: Value = serde_json::from_str(&lines[2]).unwrap();
        assert_eq!(
            (&resume["method"], &resume["params"]["threadId"]),
            (&json!("thread/fork"), &json!("th-0"))
        );
        let opened = br#"{"id":1,"result":{"thread":{"id":"th-1"}}}"#;
        assert_eq!((APP_SERVER.session_of)(opened), Some(Ok("th-1".to_string())));
        assert_eq!((APP_SERVER.session_of)(br#"{"id":0,"result":{}}"#), None);
        let refused = br#"{"id":1,"error":{"code":-1,"message":"no"}}"#;
        assert_eq!((APP_SERVER.session_of)(refused), Some(Err("no".to_string())));
        let prompt: Value =
            serde_json::from_str(&(APP_SERVER.prompt_line)(2, "th-1", "q", &[])).unwrap();
        assert_eq!(prompt["method"], "turn/start");
        assert_eq!(prompt["params"]["input"][0]["text"], "q");
    }
}
