//! What a turn's input becomes: files (`--file`, or a file an ACP client shares) and text read
//! whole within a cap, and an ACP prompt's content blocks as the question (its text blocks)
//! and its attachments.
//!
//! - An embedded resource is a file's text the client sent: attached, named by its URI. A
//!   binary one that is an image is attached as an image.
//! - A resource link to a file the client may share is read from disk as `--file` reads it
//!   (text, or an image known by its first bytes) and attached with its content. A file may be
//!   shared when it lies under the session's working folder (after following symlinks), or when
//!   the client sent it as an embedded resource earlier in the session. Any other link stays a
//!   link: a line in the question naming it, never read.
//! - An image block is attached as an image: its bytes must be one of the kinds cca takes.
//!
//! Whether the engine takes images is the turn's to decide (before anything is recorded).
//! `session/load` shows a replayed image by its stored copy ([`replayed_image`]).

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use agent_client_protocol::Error as RpcError;
use agent_client_protocol::v1::schema as acp;
use anyhow::{Context, Result};
use serde_json::json;

use crate::error::Failure;
use crate::human::human_bytes;
use crate::media::{self, Image};
use crate::turn::Attachment;

/// What a prompt asks: the question and its attachments.
#[derive(Debug)]
pub(crate) struct Prompt {
    pub query: String,
    pub attachments: Vec<Attachment>,
}

/// Reads a prompt's blocks. `cwd` is the session's working folder; `shared` the URIs the client
/// sent as embedded resources in this session so far (this prompt's are added).
pub(crate) fn read(
    blocks: &[acp::ContentBlock],
    cwd: &Path,
    shared: &mut HashSet<String>,
    cap: u64,
) -> Result<Prompt, RpcError> {
    let (mut query, mut attachments, mut links) = (String::new(), Vec::new(), Vec::new());
    for block in blocks {
        if let acp::ContentBlock::Resource(r) = block {
            match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => {
                    shared.insert(t.uri.clone())
                }
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    shared.insert(b.uri.clone())
                }
                _ => false,
            };
        }
    }
    for block in blocks {
        match block {
            acp::ContentBlock::Text(t) => {
                if !query.is_empty() && !t.text.is_empty() {
                    query.push('\n');
                }
                query.push_str(&t.text);
            }
            acp::ContentBlock::Resource(r) => match &r.resource {
                acp::EmbeddedResourceResource::TextResourceContents(t) => {
                    attachments.push(Attachment::text(t.uri.clone(), t.text.clone()));
                }
                acp::EmbeddedResourceResource::BlobResourceContents(b) => {
                    match image_from_base64(&b.blob, &b.uri)? {
                        Some(image) => attachments.push(Attachment::image(b.uri.clone(), image)),
                        None => return Err(unsupported("a binary resource that is not an image")),
                    }
                }
                _ => return Err(unsupported("this kind of resource")),
            },
            acp::ContentBlock::ResourceLink(link) => match shareable(&link.uri, cwd, shared) {
                Some(path) => attachments.push(
                    file(&path, cap)
                        .map_err(|e| invalid(format!("the linked file {}: {e:#}", link.uri)))?,
                ),
                None => links.push(format!("[{}]({})", link.name, link.uri)),
            },
            acp::ContentBlock::Image(i) => {
                let name = i.uri.clone().unwrap_or_else(|| "image".to_string());
                match image_from_base64(&i.data, &name)? {
                    Some(image) => attachments.push(Attachment::image(name, image)),
                    None => {
                        return Err(invalid(format!(
                            "the image ({}) is not a PNG, JPEG, GIF or WebP image",
                            i.mime_type
                        )));
                    }
                }
            }
            acp::ContentBlock::Audio(_) => return Err(unsupported("audio")),
            _ => return Err(unsupported("this kind of content")),
        }
    }
    if query.trim().is_empty() {
        return Err(invalid("the prompt has no text: cca needs a question".to_string()));
    }
    if !links.is_empty() {
        // Not cca's to read: the question names them, as the user gave them.
        query.push_str("\n\n");
        query.push_str(&links.join("\n"));
    }
    Ok(Prompt { query, attachments })
}

/// How `session/load` shows an image attachment in the question it replays: a markdown image
/// with the stored copy's absolute `file:` URI (the record's own link is relative to the
/// transcript, which an editor does not know). `None` for any other attachment.
pub(crate) fn replayed_image(meta: &crate::transcript::Meta, image_dir: &Path) -> Option<String> {
    meta.media_type.as_ref()?;
    let file = meta.file.as_deref().filter(|f| !f.contains('/') && !f.starts_with('.'))?;
    let name = media::link_label(meta.name.as_deref().unwrap_or("image"));
    let path = image_dir.join(file);
    let mut uri = String::from("file://");
    for b in path.display().to_string().bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(b as char)
            }
            _ => uri.push_str(&format!("%{b:02X}")),
        }
    }
    Some(format!("![{name}]({uri})"))
}

/// The file a link names, if the client may share it: under `cwd`, or sent embedded before. A
/// folder (an editor may mention one) or a missing file stays a link.
fn shareable(uri: &str, cwd: &Path, shared: &HashSet<String>) -> Option<PathBuf> {
    let real = file_path(uri)?.canonicalize().ok().filter(|p| p.is_file())?;
    if shared.contains(uri) {
        return Some(real);
    }
    real.starts_with(cwd.canonicalize().ok()?).then_some(real)
}

/// The absolute path of a `file:` URI (`file:///a/b`, `file://localhost/a/b`), percent-decoded.
fn file_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    if !rest.starts_with('/') {
        return None;
    }
    let bytes = rest.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    if out.contains(&0) {
        return None;
    }
    use std::os::unix::ffi::OsStringExt;
    Some(PathBuf::from(std::ffi::OsString::from_vec(out)))
}

/// An image from base64 data, its size checked before decoding; `None` if the bytes are not an
/// image cca takes.
fn image_from_base64(data: &str, name: &str) -> Result<Option<Image>, RpcError> {
    let most = media::decoded_len(data.len());
    if most > media::MAX_IMAGE_BYTES + 2 {
        return Err(invalid(format!(
            "{name}: an image of up to {}, over the {} an engine takes",
            human_bytes(most),
            human_bytes(media::MAX_IMAGE_BYTES)
        )));
    }
    let bytes = media::from_base64(data).ok_or_else(|| invalid(format!("{name}: not base64")))?;
    Ok(Image::new(bytes))
}

fn invalid(error: String) -> RpcError {
    RpcError::invalid_params().data(json!({ "error": error }))
}

fn unsupported(what: &str) -> RpcError {
    invalid(format!("cca takes text, images and files: {what} cannot be sent to an engine"))
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
pub(crate) fn read_text(from: impl Read, what: &str, cap: u64) -> Result<Option<String>> {
    let mut bytes = Vec::new();
    from.take(cap + 1).read_to_end(&mut bytes).with_context(|| format!("cannot read {what}"))?;
    if bytes.len() as u64 > cap {
        return Err(too_large(what, None, cap));
    }
    if bytes.is_empty() {
        return Ok(None);
    }
    crate::turn::refuse_nul(what, &bytes)?;
    String::from_utf8(bytes).map(Some).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        // Text in another encoding has no control bytes but tab, newline and the like; data has.
        let control = |b: &u8| matches!(b, 0..=8 | 0x0e..=0x1a | 0x1c..=0x1f | 0x7f);
        let failure = if e.as_bytes().iter().take(8192).any(control) {
            Failure::usage(format!("{what} is binary data, not text (invalid UTF-8 at byte {at})"))
                .hint(crate::turn::BINARY_HINT)
        } else {
            Failure::usage(format!("{what} is not UTF-8 text (invalid byte at {at})"))
                .hint("convert it first, for example with `iconv -f latin1 -t utf-8`")
        };
        failure.into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris_are_absolute_paths() {
        assert_eq!(file_path("file:///a/b%20c.rs"), Some(PathBuf::from("/a/b c.rs")));
        assert_eq!(file_path("file://localhost/x"), Some(PathBuf::from("/x")));
        for not in ["https://x/y", "file://host/x", "file:///a%00b", "file:///a%zz", "/a/b"] {
            assert_eq!(file_path(not), None, "{not}");
        }
    }

    #[test]
    fn a_replayed_image_links_its_copy_by_an_absolute_uri() {
        let meta = crate::transcript::Meta {
            name: Some("shot [1].png".into()),
            media_type: Some("image/png".into()),
            file: Some("ab12.png".into()),
            ..Default::default()
        };
        let link = replayed_image(&meta, Path::new("/home/a b/.cca/files"));
        assert_eq!(
            link.as_deref(),
            Some("![shot  1 .png](file:///home/a%20b/.cca/files/ab12.png)")
        );
        assert_eq!(
            file_path("file:///home/a%20b/.cca/files/ab12.png").unwrap(),
            Path::new("/home/a b/.cca/files/ab12.png")
        );
        let text = crate::transcript::Meta { name: Some("a.rs".into()), ..Default::default() };
        assert_eq!(replayed_image(&text, Path::new("/x")), None);
        let escape = crate::transcript::Meta { file: Some("../../etc/passwd".into()), ..meta };
        assert_eq!(replayed_image(&escape, Path::new("/x")), None, "a hand-edited name");
    }

    #[test]
    fn only_files_under_the_working_folder_or_sent_before_are_read() {
        let root = tempfile::tempdir().unwrap();
        let cwd = root.path().join("project");
        std::fs::create_dir(&cwd).unwrap();
        std::fs::write(cwd.join("a.rs"), "fn a() {}").unwrap();
        std::fs::write(root.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), cwd.join("link")).unwrap();
        let uri = |p: &Path| format!("file://{}", p.display());
        let mut shared = HashSet::new();
        assert!(shareable(&uri(&cwd.join("a.rs")), &cwd, &shared).is_some());
        assert!(shareable(&uri(&root.path().join("secret")), &cwd, &shared).is_none());
        assert!(shareable(&uri(&cwd.join("link")), &cwd, &shared).is_none(), "a symlink out");
        assert!(shareable(&uri(&cwd.join("../secret")), &cwd, &shared).is_none());
        assert!(shareable(&uri(&cwd), &cwd, &shared).is_none(), "a folder stays a link");
        assert!(shareable(&uri(&cwd.join("gone.rs")), &cwd, &shared).is_none());
        shared.insert(uri(&root.path().join("secret")));
        assert!(shareable(&uri(&root.path().join("secret")), &cwd, &shared).is_some());
    }
}
