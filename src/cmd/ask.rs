//! `cca search` and `cca ,`: the question from arguments and stdin, then one turn.

use std::io::{self, IsTerminal, Read};

use anyhow::{Context, Result};

use crate::cli::AskArgs;
use crate::error::Failure;
use crate::front::signals;
use crate::front::terminal::{Mode, Terminal};
use crate::human::human_bytes;
use crate::media;
use crate::run::Cancel;
use crate::session;
use crate::turn::{self, Ask, Attachment, Target};

pub fn search(args: &AskArgs, target: Target) -> Result<u8> {
    let (settings, store) = session::settings(&super::flags(&args.answering))?;
    let (query, stdin) = question(&args.query)?;
    let mut attachments: Vec<Attachment> =
        stdin.map(|text| Attachment::text("stdin", text)).into_iter().collect();
    for path in &args.files {
        attachments.push(file(path)?);
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
fn question(words: &[String]) -> Result<(String, Option<String>)> {
    let stdin = io::stdin();
    let piped = !stdin.is_terminal();
    let query = words.join(" ");
    if !query.trim().is_empty() {
        let attachment = if piped { read_text(stdin, "stdin")? } else { None };
        return Ok((query, attachment.filter(|a| !a.is_empty())));
    }
    if !query.is_empty() {
        return Err(Failure::usage("the question is empty").into());
    }
    if !piped {
        return Err(Failure::usage("no question")
            .hint("give it as arguments (`cca search \"what is ...\"`) or on stdin (`echo ... | cca search`)")
            .into());
    }
    match read_text(stdin, "stdin")? {
        Some(text) if !text.trim().is_empty() => Ok((text, None)),
        _ => Err(Failure::usage("no question: stdin was empty")
            .hint("give the question as arguments: `cca search \"what is ...\"`")
            .into()),
    }
}

/// A file named with `--file` (or a file an ACP client shared): an image (PNG, JPEG, GIF or
/// WebP, known by its first bytes) or text, read whole and checked.
pub(crate) fn file(path: &std::path::Path) -> Result<Attachment> {
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
    let text = read_text(io::Cursor::new(start).chain(reader), &shown.to_string())?;
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

/// Reads text input whole; refuses what is not text (invalid UTF-8, NUL bytes).
fn read_text(mut from: impl Read, what: &str) -> Result<Option<String>> {
    let mut bytes = Vec::new();
    from.read_to_end(&mut bytes).with_context(|| format!("cannot read {what}"))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    if let Some(at) = memchr::memchr(0, &bytes) {
        return Err(Failure::usage(format!(
            "{what} holds a NUL byte (at byte {at}): cca takes text only"
        ))
        .hint("for binary data, attach a text form of it (`xxd file | cca search ...`)")
        .into());
    }
    String::from_utf8(bytes).map(Some).map_err(|e| {
        Failure::usage(format!(
            "{what} is not UTF-8 text (invalid byte at {})",
            e.utf8_error().valid_up_to()
        ))
        .hint("convert it first, for example with `iconv -f latin1 -t utf-8`")
        .into()
    })
}
