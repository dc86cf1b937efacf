//! `cca search` and `cca ,`: the question from arguments and stdin, then one turn.

use std::io::{self, IsTerminal, Read};

use anyhow::{Context, Result};

use crate::cli::AskArgs;
use crate::config::{Flags, Render};
use crate::error::Failure;
use crate::front::signals;
use crate::front::terminal::{Mode, Terminal};
use crate::human::human_bytes;
use crate::media;
use crate::run::Cancel;
use crate::session;
use crate::turn::{self, Ask, Attachment, Target};

pub fn search(args: &AskArgs, target: Target) -> Result<u8> {
    match ask(args, target) {
        // `--json` answers in JSON, whatever stopped the turn.
        Err(e) if args.json => Ok(crate::front::terminal::json_error(&e)),
        done => done,
    }
}

fn ask(args: &AskArgs, target: Target) -> Result<u8> {
    let render = args.raw.then_some(Render::Never);
    let flags = Flags { render, ..super::flags(&args.answering) };
    let (settings, store) = session::settings(&flags)?;
    let cap = input_cap(&settings);
    let (query, stdin) = question(&args.query, cap)?;
    let mut attachments: Vec<Attachment> =
        stdin.map(|text| Attachment::text("stdin", text)).into_iter().collect();
    for path in &args.files {
        attachments.push(file(path, cap)?);
    }
    let mode = if args.json {
        Mode::Json
    } else if args.quiet {
        Mode::Quiet
    } else {
        Mode::Normal
    };
    let ask = Ask { target, query, attachments, wait: !args.no_wait };
    let mut terminal = Terminal::new(mode, &settings);
    let cancel = Cancel::new();
    let _signals = signals::route_to(&cancel)?;
    match turn::ask(&settings, &store, &ask, &mut terminal, &cancel) {
        Ok(outcome) => terminal.finish(&outcome),
        Err(e) => terminal.not_recorded(e, &ask.query),
    }
}

/// The question from the arguments, or from stdin; with both, stdin is an attachment.
fn question(words: &[String], cap: u64) -> Result<(String, Option<String>)> {
    let stdin = io::stdin();
    let piped = !stdin.is_terminal();
    let query = words.join(" ");
    if !query.trim().is_empty() {
        let attachment = if piped { read_text(stdin, "stdin", cap)? } else { None };
        return Ok((query, attachment.filter(|a| !a.is_empty())));
    }
    if !words.is_empty() {
        return Err(Failure::usage("the question is empty")
            .hint("give it as arguments (`cca search \"what is ...\"`) or on stdin (`echo ... | cca search`)")
            .into());
    }
    if !piped {
        return Err(Failure::usage("no question")
            .hint("give it as arguments (`cca search \"what is ...\"`) or on stdin (`echo ... | cca search`)")
            .into());
    }
    match read_text(stdin, "stdin", cap)? {
        Some(text) if !text.trim().is_empty() => Ok((text, None)),
        _ => Err(Failure::usage("no question: stdin was empty")
            .hint("give the question as arguments: `cca search \"what is ...\"`")
            .into()),
    }
}

/// A file named with `--file` (or a file an ACP client shared): an image (PNG, JPEG, GIF or
/// WebP, known by its first bytes) or text, read whole and checked.
pub(crate) fn file(path: &std::path::Path, cap: u64) -> Result<Attachment> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| {
        Failure::usage(format!("cannot read {shown}: {e}"))
            .hint("--file takes the path of a text file")
    })?;
    if meta.is_dir() {
        return Err(Failure::usage(format!("{shown} is a folder, not a file"))
            .hint("attach the files in it one by one: `-f DIR/a.rs -f DIR/b.rs`")
            .into());
    }
    if !meta.is_file() {
        return Err(Failure::usage(format!("{shown} is not a regular file")).into());
    }
    let mut reader = std::fs::File::open(path)
        .map_err(|e| Failure::usage(format!("cannot read {shown}: {e}")))?;
    let mut start = Vec::with_capacity(16);
    (&mut reader)
        .take(16)
        .read_to_end(&mut start)
        .with_context(|| format!("cannot read {shown}"))?;
    if media::image_type(&start).is_some() {
        return image_file(path, start, reader, meta.len());
    }
    if meta.len() > cap {
        return Err(too_large(&shown.to_string(), Some(meta.len()), cap));
    }
    let text = read_text(io::Cursor::new(start).chain(reader), &shown.to_string(), cap)?;
    Ok(Attachment::text(path.display().to_string(), text.unwrap_or_default()))
}

/// The rest of an image file whose first bytes are `start`, refused when too large before it is
/// read.
fn image_file(
    path: &std::path::Path,
    mut bytes: Vec<u8>,
    mut rest: std::fs::File,
    size: u64,
) -> Result<Attachment> {
    let shown = path.display();
    if size > media::MAX_IMAGE_BYTES {
        return Err(Failure::usage(format!(
            "{shown} is an image of {}, over the {} an engine takes",
            human_bytes(size),
            human_bytes(media::MAX_IMAGE_BYTES)
        ))
        .hint("make it smaller first (for example `convert -resize 50%`)")
        .into());
    }
    rest.read_to_end(&mut bytes).with_context(|| format!("cannot read {shown}"))?;
    let image = media::Image::new(bytes).expect("its first bytes are an image's");
    Ok(Attachment::image(path.display().to_string(), image))
}

/// The most input one turn can bring: as much as the engine taking the most takes
/// (`max_input_bytes`; [`UNLIMITED_ENGINE_INPUT`] for one without a limit). Input past it is
/// refused before it is read whole: a 3 GB file is refused by its size alone.
pub(crate) fn input_cap(settings: &crate::config::Settings) -> u64 {
    let most =
        settings.engines.values().map(|e| e.max_input_bytes.unwrap_or(UNLIMITED_ENGINE_INPUT));
    most.max().unwrap_or(UNLIMITED_ENGINE_INPUT)
}

/// What cca reads for a turn of an engine that sets no `max_input_bytes`.
const UNLIMITED_ENGINE_INPUT: u64 = 256 << 20;

fn too_large(what: &str, size: Option<u64>, cap: u64) -> anyhow::Error {
    let size = size.map_or("more".into(), |n| format!("{}, more", human_bytes(n)));
    Failure::usage(format!(
        "{what} is {size} than any engine takes ({}); it was not read",
        human_bytes(cap)
    ))
    .hint("attach a part of it (`head -c 1000000 FILE | cca search ...`), or raise max_input_bytes in config.toml")
    .into()
}

/// Reads text input, at most `cap` bytes; refuses more, and what is not text (invalid UTF-8,
/// NUL bytes).
fn read_text(from: impl Read, what: &str, cap: u64) -> Result<Option<String>> {
    let mut bytes = Vec::new();
    from.take(cap + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read {what}"))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(what, None, cap));
    }
    if bytes.is_empty() {
        return Ok(None);
    }
    turn::refuse_nul(what, &bytes)?;
    String::from_utf8(bytes).map(Some).map_err(|e| {
        Failure::usage(format!(
            "{what} is not UTF-8 text (invalid byte at {})",
            e.utf8_error().valid_up_to()
        ))
        .hint("convert it first, for example with `iconv -f latin1 -t utf-8`")
        .into()
    })
}
