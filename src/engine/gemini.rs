//! gemini (`@google/gemini-cli`), with the prompt on stdin and `-o stream-json` output.
//!
//! It reads stdin only if data arrives within 500 ms of its start (cca writes at once), cuts
//! stdin at 8 MiB without a word (cca refuses larger turns before spawning), and answers a
//! prompt larger than the model's window with no output and exit 0 (an empty answer is a
//! failure). Its errors go to stderr, and the final `result` line says `status`.

use std::path::PathBuf;

use serde_json::Value;

use super::{Arg, Invocation, LineBuffer, Output, Request, Usage, note_line};
use crate::config::{EngineConfig, HistoryMode, SystemPromptMode};
use crate::frame;

pub fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    // Without --skip-trust, gemini refuses an untrusted folder (exit 55).
    let mut args: Vec<Arg> =
        ["-o", "stream-json", "--skip-trust"].into_iter().map(Arg::plain).collect();
    if let Some(model) = request.model {
        args.push(Arg::plain("-m"));
        args.push(Arg::plain(model));
    }
    let mut env = Vec::new();
    let inline_system = match engine.system_prompt {
        SystemPromptMode::Inline => Some(request.system),
        SystemPromptMode::Native => {
            env.push((
                "GEMINI_SYSTEM_MD".to_string(),
                Arg::File { name: "system.md", contents: request.system.to_string() },
            ));
            None
        }
    };
    if engine.history == HistoryMode::Structured {
        anyhow::bail!(
            crate::error::Failure::usage(
                "history = \"structured\" is not available for gemini in this version of cca"
            )
            .hint("set history = \"inline\" in [engines.gemini] of config.toml")
        );
    }
    let stdin = frame::inline(inline_system, request.live, request.attachment, request.query);
    args.extend(engine.args.iter().map(Arg::plain));
    Ok(Invocation { program, args, env, stdin })
}

/// Decodes `-o stream-json`: assistant message deltas, tool calls, and the final result.
#[derive(Debug, Default)]
pub struct Decoder {
    lines: LineBuffer,
}

impl super::Decoder for Decoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        let mut lines = std::mem::take(&mut self.lines);
        lines.feed(chunk, |line| decode_line(line, out));
        self.lines = lines;
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        self.lines.finish(|line| decode_line(line, out));
    }
}

fn decode_line(line: &[u8], out: &mut Vec<Output>) {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        note_line(line, out);
        return;
    };
    match v["type"].as_str() {
        Some("message") if v["role"] == "assistant" => {
            if let Some(text) = v["content"].as_str()
                && !text.is_empty()
            {
                out.push(Output::Text(text.to_string()));
            }
        }
        Some("tool_use") => {
            let name = v["tool_name"].as_str().unwrap_or("tool");
            let params = &v["parameters"];
            let gist = ["query", "url", "prompt", "command", "file_path"]
                .iter()
                .find_map(|k| params[k].as_str())
                .map(str::to_string)
                .unwrap_or_else(|| params.to_string());
            out.push(Output::Tool(format!("{name}: {}", crate::transcript::one_line(&gist, 200))));
        }
        Some("error") => {
            if let Some(message) = v["message"].as_str() {
                out.push(Output::Note(message.to_string()));
            }
        }
        Some("result") => {
            let stats = &v["stats"];
            out.push(Output::Usage(Usage {
                input_tokens: stats["input_tokens"].as_u64(),
                output_tokens: stats["output_tokens"].as_u64(),
                cost_usd: None,
            }));
            if v["status"] != "success" {
                let message = v["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("gemini reported status {}", v["status"]));
                out.push(Output::Error(message));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Decoder as _;

    fn decode(sample: &str) -> Vec<Output> {
        let mut d = Decoder::default();
        let mut out = Vec::new();
        for chunk in sample.as_bytes().chunks(29) {
            d.feed(chunk, &mut out);
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn success_and_failure_samples() {
        let out = decode(include_str!("../../tests/fixtures/gemini-stream-json-success.jsonl"));
        let text: String = out
            .iter()
            .filter_map(|o| if let Output::Text(t) = o { Some(t.as_str()) } else { None })
            .collect();
        assert_eq!(text, "ECHO: hello there");
        assert!(!out.iter().any(|o| matches!(o, Output::Error(_))));

        let out = decode(include_str!("../../tests/fixtures/gemini-stream-json-http500.jsonl"));
        assert!(
            out.iter().any(|o| matches!(o, Output::Error(e) if e.contains("mock forced HTTP 500"))),
            "{out:?}"
        );
        assert!(!out.iter().any(|o| matches!(o, Output::Text(_))));
    }
}
