//! Images handed to an engine with a question: which kinds cca takes (known by their first
//! bytes, whatever a file is called or a client says), the name a stored copy gets (its
//! content's SHA-256, so one image is stored once and a name never changes meaning), and the
//! transcript's link to that copy.
//!
//! Pure: bytes in, text out. `store` writes the copies under `$CCA_HOME/files/`; engines put
//! the bytes in their requests.

use std::sync::Arc;

use base64::Engine as _;
use sha2::Digest as _;

/// The largest image cca takes, in bytes: Anthropic's API refuses larger ones.
pub(crate) const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// Where stored images live, under `CCA_HOME`; transcripts link to them as `../files/NAME`.
pub(crate) const FILES_DIR: &str = "files";

/// An image attached to a question.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`, from the bytes themselves.
    pub media_type: &'static str,
    pub bytes: Arc<[u8]>,
}

impl Image {
    /// The image these bytes are, if they are one of the kinds cca takes.
    pub fn new(bytes: Vec<u8>) -> Option<Image> {
        let media_type = image_type(&bytes)?;
        Some(Image { media_type, bytes: bytes.into() })
    }

    /// The stored copy's file name: the SHA-256 of the bytes and the kind's extension.
    pub fn file_name(&self) -> String {
        let digest = sha2::Sha256::digest(&self.bytes);
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.{}", extension(self.media_type))
    }

    /// The bytes in standard base64, as engines' JSON requests carry images.
    pub fn base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(&self.bytes)
    }

    /// What the transcript keeps for the image: a markdown image link to the stored copy,
    /// relative to the transcript's folder, so a markdown viewer shows it.
    pub fn link(&self, name: &str) -> String {
        format!("![{}](../{FILES_DIR}/{})", link_label(name), self.file_name())
    }
}

/// A name made safe as a markdown link's text: no brackets, backslashes or control characters.
/// Whether `name` is one [`Image::file_name`] gives: 64 hex digits and an image's extension
/// (what `cca sync` takes from another machine into `files/`, never a path).
pub(crate) fn is_copy_name(name: &str) -> bool {
    name.split_once('.').is_some_and(|(hex, ext)| {
        hex.len() == 64
            && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            && ["png", "jpg", "gif", "webp"].contains(&ext)
    })
}

pub(crate) fn link_label(name: &str) -> String {
    let label: String = name
        .chars()
        .map(|c| if c.is_control() || matches!(c, '[' | ']' | '\\') { ' ' } else { c })
        .collect();
    label.trim().to_string()
}

/// The kind of image the bytes are, by their magic numbers: PNG, JPEG, GIF, WebP.
pub(crate) fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn extension(media_type: &str) -> &'static str {
    match media_type {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        _ => "webp",
    }
}

/// Bytes from standard base64 (as ACP carries images), or `None` if it is not base64.
pub(crate) fn from_base64(text: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(text.trim()).ok()
}

/// How many bytes base64 text of this length decodes to, at most: checked before decoding.
pub(crate) fn decoded_len(base64_len: usize) -> u64 {
    (base64_len as u64).div_ceil(4) * 3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest PNG: one transparent pixel.
    pub(super) const PIXEL_PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

    #[test]
    fn image_kinds_are_known_by_their_first_bytes() {
        let png = from_base64(PIXEL_PNG).unwrap();
        assert_eq!(image_type(&png), Some("image/png"));
        assert_eq!(image_type(&[0xff, 0xd8, 0xff, 0xe0, 0, 0x10]), Some("image/jpeg"));
        assert_eq!(image_type(b"GIF89a\x01\x00"), Some("image/gif"));
        assert_eq!(image_type(b"RIFF\x24\x00\x00\x00WEBPVP8 "), Some("image/webp"));
        for not in [&b"RIFF\x24\x00\x00\x00WAVEfmt "[..], b"\x89PNG", b"hello", b""] {
            assert_eq!(image_type(not), None, "{not:?}");
        }
    }

    #[test]
    fn a_stored_copy_is_named_by_its_content() {
        let image = Image::new(from_base64(PIXEL_PNG).unwrap()).unwrap();
        let name = image.file_name();
        assert_eq!(name.len(), 64 + 4, "{name}");
        assert!(name.ends_with(".png"));
        assert_eq!(image.base64(), PIXEL_PNG);
        let mut other = image.bytes.to_vec();
        other.push(0);
        assert_ne!(Image::new(other).unwrap().file_name(), name);
        assert_eq!(image.link("a [x].png\n"), format!("![a  x .png](../files/{name})"));
    }

    #[test]
    fn decoded_sizes_are_bounded_before_decoding() {
        assert!(decoded_len(PIXEL_PNG.len()) >= from_base64(PIXEL_PNG).unwrap().len() as u64);
        assert_eq!(from_base64("not base64!"), None);
    }
}
