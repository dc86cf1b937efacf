//! Any program that reads a prompt on stdin and writes the answer on stdout, declared in
//! `config.toml` as `[engines.NAME]` with `command = [...]`.

use std::path::PathBuf;

use super::{Arg, EngineConfig, Invocation, Output, Request, Spec, SystemPromptMode};
use crate::error::Failure;
use crate::frame;

/// Any `[engines.NAME]` with a `command`: no limits known, plain text out.
pub(crate) const SPEC: Spec = Spec {
    name: "command",
    program_var: None,
    // Started for each turn, never kept: no `keep_warm` or `standby`.
    keys: &[
        "command",
        "model",
        "model_arg",
        "version_args",
        "system_prompt",
        "system_prompt_arg",
        "history",
        "max_input_bytes",
        "context_budget",
        "model_budgets",
        "bytes_per_token",
    ],
    install: None,
    models: &[],
    context_budget: 100_000,
    max_input_bytes: None,
    default_tools: None,
    failure_hint: None,
    empty_answer_hint: "try again; if it keeps happening, run the engine by hand to see what it does",
    refused_hint: None,
    streams_input: None,
    keeps: None,
    one_shot: true,
    takes_images: false,
    invocation,
    decoder: |_| Box::new(TextDecoder::default()),
    tidy: |_| super::Tidied::default(),
    home: |_| None,
    stderr_noise: None,
    // Started for each turn, never kept.
    reads_at_start: |_| Vec::new(),
};

/// Linux refuses a single argument over 128 KiB; stay well below.
const MAX_ARG: usize = 100 * 1024;

pub(crate) fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    let mut args: Vec<Arg> = engine.args.iter().map(Arg::plain).collect();
    if let (Some(flag), Some(model)) = (&engine.model_arg, request.model) {
        args.extend(super::model_args(flag, model)?);
    }
    let inline_system = match (engine.system_prompt, &engine.system_prompt_arg) {
        (SystemPromptMode::Native, Some(flag)) => {
            if request.system.len() > MAX_ARG {
                anyhow::bail!(
                    Failure::usage(format!(
                        "the system prompt ({} bytes) is too long to pass as an argument to {}",
                        request.system.len(),
                        engine.name
                    ))
                    .hint(format!("set system_prompt = \"inline\" in [engines.{}]", engine.name))
                );
            }
            args.push(Arg::plain(flag));
            args.push(Arg::plain(request.system));
            None
        }
        _ => Some(request.system),
    };
    let stdin = frame::inline(inline_system, request.live, &request.attachments, request.query);
    Ok(Invocation {
        program,
        args,
        env: Vec::new(),
        stdin,
        images: Vec::new(),
        follow_up: Vec::new(),
        resume: None,
    })
}

/// Plain text engines: stdout is the answer. Invalid UTF-8 becomes U+FFFD; chunks may split a
/// character anywhere.
#[derive(Debug, Default)]
pub(crate) struct TextDecoder {
    pending: Vec<u8>,
    warned: bool,
}

impl super::Decoder for TextDecoder {
    fn feed(&mut self, chunk: &[u8], out: &mut Vec<Output>) {
        self.pending.extend_from_slice(chunk);
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).expect("checked"));
                    match e.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                            if !self.warned {
                                self.warned = true;
                                out.push(Output::Note(
                                    "cca: the engine wrote bytes that are not UTF-8; they are shown and kept as \u{fffd}".into(),
                                ));
                            }
                        }
                        // An incomplete character at the end: wait for the next chunk.
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        self.pending = rest.to_vec();
        if !text.is_empty() {
            out.push(Output::Text(text));
        }
    }

    fn finish(&mut self, out: &mut Vec<Output>) {
        if !self.pending.is_empty() {
            let text = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            out.push(Output::Text(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Decoder as _;

    #[test]
    fn text_decoder_rejoins_split_characters() {
        let mut d = TextDecoder::default();
        let mut out = Vec::new();
        let bytes = "héllo €".as_bytes();
        for b in bytes {
            d.feed(&[*b], &mut out);
        }
        d.feed(b"\xff!", &mut out);
        d.finish(&mut out);
        assert!(
            matches!(&out[out.len() - 2], Output::Note(n) if n.contains("not UTF-8")),
            "{out:?}"
        );
        let text: String = out
            .into_iter()
            .filter_map(|o| if let Output::Text(t) = o { Some(t) } else { None })
            .collect();
        assert_eq!(text, "héllo €\u{fffd}!");
    }
}
