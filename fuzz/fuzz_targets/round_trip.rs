//! Arbitrary records, rendered then parsed, come back exactly.
#![no_main]

use cca::transcript::{self, Header, Kind, Meta, Record, Transcript};
use libfuzzer_sys::fuzz_target;

const KINDS: [Kind; 7] = [
    Kind::User,
    Kind::Attachment,
    Kind::Assistant,
    Kind::Failed,
    Kind::Interrupted,
    Kind::Clear,
    Kind::Compaction,
];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // Records separated by U+001F; each starts with a byte that picks its kind.
    let mut parts = text.split('\u{1f}');
    let title = parts.next().unwrap_or("").to_string();
    let records: Vec<Record> = parts
        .map(|part| {
            let kind = KINDS[part.bytes().next().unwrap_or(0) as usize % KINDS.len()];
            let content = part.get(1..).unwrap_or("").to_string();
            let meta = Meta { reason: Some(content.chars().take(20).collect()), ..Meta::default() };
            Record { kind, meta, content }
        })
        .collect();
    let header = Header {
        format: transcript::FORMAT,
        id: "20261121-101500".into(),
        created: "2026-11-21T10:15:00Z".into(),
        engine: "claude".into(),
        model: None,
        prompt: "search_agents/haiku45".into(),
        prompt_hash: "fnv1a64:0".into(),
        cwd: title.clone(),
        title,
        forked_from: None,
        name: None,
        imported: None,
        other: Default::default(),
    };
    let t = Transcript { header, records };
    let rendered = transcript::render(&t);
    let (back, problems) = transcript::parse(&rendered).expect("a render reads back");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back, t);
});
