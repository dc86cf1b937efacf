//! Any program that reads a prompt on stdin and writes the answer on stdout, declared in
//! `config.toml` as `[engines.NAME]` with `command = [...]`.

use std::path::PathBuf;

use super::{Arg, Invocation, Request};
use crate::config::{EngineConfig, SystemPromptMode};
use crate::error::Failure;
use crate::frame;

/// Linux refuses a single argument over 128 KiB; stay well below.
const MAX_ARG: usize = 100 * 1024;

pub fn invocation(
    engine: &EngineConfig,
    program: PathBuf,
    request: &Request,
) -> anyhow::Result<Invocation> {
    let mut args: Vec<Arg> = engine.args.iter().map(Arg::plain).collect();
    if let (Some(flag), Some(model)) = (&engine.model_arg, request.model) {
        args.push(Arg::plain(flag));
        args.push(Arg::plain(model));
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
    let stdin = frame::inline(inline_system, request.live, request.attachment, request.query);
    Ok(Invocation { program, args, env: Vec::new(), stdin })
}
