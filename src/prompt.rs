//! System prompts: the built-in catalogue (embedded, so an installed cca works from any
//! directory), name rules, and the hash recorded in transcript headers.
//!
//! Pure: reading a user's override file is `store`'s job; this module decides what it means.

/// The prompt used when nothing else is chosen.
pub const DEFAULT: &str = "search_agents/haiku45";

/// The prompt that asks an engine to summarise older turns (compaction).
pub const COMPACTION: &str = "compaction";

const BUILTIN: &[(&str, &str)] = &[
    ("search_agents/haiku45", include_str!("../prompts/search_agents/haiku45.md")),
    ("general", include_str!("../prompts/general.md")),
    ("compaction", include_str!("../prompts/compaction.md")),
];

/// A resolved system prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The name recorded in the transcript (a file's path for `--prompt-file`).
    pub name: String,
    pub text: String,
}

impl Prompt {
    pub fn hash(&self) -> String {
        hash(&self.text)
    }
}

pub fn builtin(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, text)| *text)
}

pub fn builtin_names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(n, _)| *n)
}

/// The prompts a conversation can be asked with, for completion, an editor's choice and
/// hints: the built-in ones, then `own` (the user's), once each, without [`COMPACTION`], which
/// cca uses itself to summarise (overriding it changes summaries, not answers).
pub fn choices(own: Vec<String>) -> Vec<String> {
    let mut names: Vec<String> = builtin_names().map(String::from).collect();
    for name in own {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.retain(|n| n != COMPACTION);
    names
}

/// Prompt names are relative paths of plain segments (`search_agents/haiku45`), so that
/// `$CCA_HOME/prompts/NAME.md` can never point outside that folder.
pub fn validate_name(name: &str) -> Result<(), String> {
    let ok_segment = |s: &str| {
        !s.is_empty()
            && !s.starts_with('.')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    };
    if name.split('/').all(ok_segment) {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a prompt name: use letters, digits, `_`, `-` and `.`, \
             with `/` between folders (like `search_agents/haiku45`)"
        ))
    }
}

/// A stable fingerprint of a prompt's text (FNV-1a, 64 bits): enough to tell that a prompt
/// changed between turns, with no extra dependency.
pub fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in text.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_the_prompts_folder() {
        for bad in ["", "/etc/passwd", "../x", "a/../b", "a//b", ".hidden", "a/", "a\\b", "a b"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
        for good in ["search_agents/haiku45", "general", "my-prompt.v2", "a/b/c"] {
            assert!(validate_name(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn the_builtins_are_real_prompts() {
        assert!(builtin(DEFAULT).unwrap().len() > 500);
        assert!(builtin(COMPACTION).is_some());
        for name in builtin_names() {
            validate_name(name).unwrap();
        }
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(hash(""), "fnv1a64:cbf29ce484222325");
        assert_ne!(hash("a"), hash("b"));
    }
}
