//! The layers of docs/DESIGN.md hold in the source: no module of `src/` uses one on its own layer
//! or above it. The layers are read from the design document itself, so the two cannot drift.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The heading of the section in docs/DESIGN.md whose numbered list gives the layers.
const SECTION: &str = "### Layers";

/// The layers, bottom to top: each a list of top-level modules of `src/`.
fn layers(design: &str) -> Vec<Vec<String>> {
    let section = design
        .split_once(SECTION)
        .unwrap_or_else(|| panic!("docs/DESIGN.md has no `{SECTION}` section"))
        .1;
    let mut layers = Vec::new();
    for line in section.lines().skip(1).take_while(|line| !line.starts_with('#')) {
        let Some((number, rest)) = line.split_once(". ") else { continue };
        if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // `a`, `b`, `c`: what they are for
        let names = rest.split_once(':').map_or(rest, |(names, _)| names);
        let layer: Vec<String> = names
            .split(',')
            .map(|name| name.trim().trim_matches('`').to_string())
            .filter(|name| !name.is_empty())
            .collect();
        layers.push(layer);
    }
    assert!(!layers.is_empty(), "docs/DESIGN.md's `{SECTION}` section lists no layers");
    layers
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to: `src/x.rs`, `src/x/mod.rs` and
/// `src/x/y/z.rs` all belong to `x`. The crate root (`lib.rs`, `main.rs`) belongs to none.
fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The source without comments, and without the items under `#[cfg(test)]`: unit tests may
/// reach any module to set up what they check.
fn code(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    for line in source.lines() {
        let line = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push_str(line);
        out.push('\n');
    }
    let mut code = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find("#[cfg(test)]") {
        code.push_str(&rest[..at]);
        rest = skip_item(&rest[at + "#[cfg(test)]".len()..]);
    }
    code.push_str(rest);
    code
}

/// What follows the next item of `text`: up to its `;`, or to the brace that closes its body.
fn skip_item(text: &str) -> &str {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            ';' if depth == 0 => return &text[at + 1..],
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &text[at + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

/// The top-level modules a piece of code names through `crate::`: `crate::x::...` and each
/// path of `crate::{x, y::z, ...}`.
fn uses(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            for item in top_level_items(group) {
                found.insert(item);
            }
        } else {
            found.insert(identifier(rest));
        }
    }
    found.remove("self");
    found.remove("");
    found
}

/// The first name of each comma-separated path in `a, b::{c, d}, e}...`, up to the closing brace.
fn top_level_items(group: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut item_start = Some(0);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => item_start = Some(at + 1),
            _ => {
                if let Some(start) = item_start.take() {
                    items.push(identifier(group[start..].trim_start()));
                }
            }
        }
    }
    items
}

/// The identifier `text` starts with.
fn identifier(text: &str) -> String {
    text.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

#[test]
fn no_module_uses_one_on_its_own_layer_or_above_it() {
    // Read at run time, so that the check can be pointed at another copy of the tree.
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let layers = layers(&fs::read_to_string(root.join("docs/DESIGN.md")).unwrap());
    let level = |module: &str| layers.iter().position(|layer| layer.iter().any(|m| m == module));
    let src = root.join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();

    let mut problems = Vec::new();
    let mut modules = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let Some(module) = module_of(relative) else { continue };
        modules.insert(module.clone());
        let Some(own) = level(&module) else { continue };
        for used in uses(&code(&fs::read_to_string(file).unwrap())) {
            if used == module {
                continue;
            }
            match level(&used) {
                Some(other) if other < own => {}
                Some(other) => problems.push(format!(
                    "src/{}: `{module}` (layer {}) uses `{used}` (layer {}), {}",
                    relative.display(),
                    own + 1,
                    other + 1,
                    if other == own { "on its own layer" } else { "above it" }
                )),
                None => problems.push(format!(
                    "src/{}: `{module}` uses `{used}`, which no layer lists",
                    relative.display()
                )),
            }
        }
    }
    for module in &modules {
        if level(module).is_none() {
            problems.push(format!("src/: module `{module}` is on no layer"));
        }
    }
    for module in layers.iter().flatten() {
        if !modules.contains(module) {
            problems.push(format!("layer module `{module}` is not a module of src/"));
        }
    }
    assert!(
        problems.is_empty(),
        "the source breaks the layers of docs/DESIGN.md ({SECTION}); move the code to the layer \
         it belongs to, or correct the document:\n{}",
        problems.join("\n")
    );
}

#[test]
fn uses_finds_paths_and_groups_and_skips_tests_and_comments() {
    let source = "use crate::{store::{self, Store}, error::Error};\n\
                  use crate::human;\n\
                  // crate::commented\n\
                  fn f() { crate::run::spawn(); pub(crate) struct S; }\n\
                  #[cfg(test)]\nmod tests { use crate::cmd; }\n\
                  #[cfg(test)]\nuse crate::front;\n";
    let found: Vec<String> = uses(&code(source)).into_iter().collect();
    assert_eq!(found, ["error", "human", "run", "store"]);
    assert_eq!(module_of(Path::new("front/acp/serve.rs")).as_deref(), Some("front"));
    assert_eq!(module_of(Path::new("store.rs")).as_deref(), Some("store"));
    assert_eq!(module_of(Path::new("lib.rs")), None);
}

#[test]
fn no_file_of_src_passes_a_thousand_lines() {
    // A file that long holds several ideas: make it a folder of files by idea (docs/DESIGN.md).
    let src = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, lines)| *lines > 1000)
        .map(|(f, lines)| format!("{}: {lines} lines", f.display()))
        .collect();
    assert!(long.is_empty(), "files past 1,000 lines:\n{}", long.join("\n"));
}
