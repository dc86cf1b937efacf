//! Framed content never holds one of cca's tags, however it is cut into chunks.
#![no_main]

use cca::frame::{self, FrameEscaper};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    let whole = frame::escape(text);
    let split = (cut as usize).min(rest.len());
    let mut chunked = Vec::new();
    let mut escaper = FrameEscaper::default();
    escaper.push(&rest[..split], &mut chunked);
    escaper.push(&rest[split..], &mut chunked);
    escaper.finish(&mut chunked);
    assert_eq!(chunked, whole.as_bytes());
    let lower = whole.to_lowercase();
    for tag in frame::TAG_NAMES {
        assert!(!lower.contains(&format!("<{tag}")), "{whole:?}");
        assert!(!lower.contains(&format!("</{tag}")), "{whole:?}");
    }
});
