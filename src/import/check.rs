//! What the fuzz targets hold each import parser to, over any bytes (fuzz/fuzz_targets/
//! import_*.rs): it returns, and what `cca import` would write of each conversation reads back
//! as the same records, under a header made of what the file said. Only tests and fuzz targets
//! call it (the `testing` feature).

use super::{Tool, claude, codex, gemini, llm, records, render_records};
use crate::transcript::{self, Header, Imported};

/// Parses `bytes` as `tool`'s files (`claude`, `gemini`, `codex`, or `llm`'s `logs --json`)
/// and checks what import would write of them; panics when a check fails.
pub fn check_import(tool: &str, bytes: &[u8]) {
    let (tool, conversations) = match tool {
        "claude" => (Tool::Claude, vec![claude::parse(bytes)]),
        "gemini" => (Tool::Gemini, vec![gemini::parse(bytes, None)]),
        "codex" => (Tool::Codex, vec![codex::parse(bytes)]),
        "llm" => (Tool::Llm, llm::parse(bytes).0),
        other => panic!("no import parser for {other}"),
    };
    for conv in conversations {
        if matches!(tool, Tool::Claude | Tool::Codex) {
            // Each exchange has a line of its own: nothing is imported twice (a loop of
            // parents is cut).
            assert!(
                conv.exchanges.len() as u64 <= conv.lines,
                "{} exchanges",
                conv.exchanges.len()
            );
        }
        let Some(last) = conv.exchanges.last() else { continue };
        let body = render_records(tool, &conv.exchanges, 1);
        let header = Header {
            format: transcript::FORMAT,
            id: "20261121-101500".into(),
            created: conv.created.clone().unwrap_or_else(|| "2026-11-21T10:15:00Z".into()),
            engine: tool.name().into(),
            model: conv.exchanges.iter().find_map(|e| e.model.clone()),
            prompt: crate::prompt::DEFAULT.into(),
            prompt_hash: "fnv1a64:0".into(),
            cwd: conv.cwd.clone().unwrap_or_default(),
            title: transcript::one_line(conv.title.as_deref().unwrap_or(""), 80),
            forked_from: None,
            name: None,
            imported: Some(Imported {
                tool: tool.name().into(),
                source: "fuzz".into(),
                conversation: conv.id.clone(),
                lines: conv.lines,
                bytes: conv.bytes,
                last: last.key.clone(),
                exchanges: conv.exchanges.len() as u64,
                body: body.len() as u64,
            }),
            other: Default::default(),
        };
        let text = transcript::render_header(&header) + &body;
        let (t, problems) = transcript::parse(&text).expect("an import reads back");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(t.header, header);
        assert_eq!(t.records, records(tool, &conv.exchanges));
    }
}

#[cfg(test)]
mod tests {
    use super::check_import;

    #[test]
    fn the_fuzz_seeds_hold() {
        let seeds = concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/seeds");
        for tool in ["claude", "gemini", "codex", "llm"] {
            let dir = std::path::Path::new(seeds).join(format!("import_{tool}"));
            let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
            assert!(!files.is_empty(), "{}", dir.display());
            for file in files {
                check_import(tool, &std::fs::read(file.path()).unwrap());
            }
        }
    }
}
