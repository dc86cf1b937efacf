//! Syntax highlighting, loaded on first use: the syntaxes (syntect's compact default set) are
//! read when the first code fence names a language, and kept for the process.

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{
    Color, FontStyle, ScopeSelectors, StyleModifier, Theme, ThemeItem, ThemeSettings,
};
use syntect::parsing::SyntaxSet;

use super::inline::{Attr, Span};
use super::palette;

static SYNTAXES: OnceLock<SyntaxSet> = OnceLock::new();
static THEME: OnceLock<Theme> = OnceLock::new();

/// The theme's colours name the terminal's palette, not RGB: alpha 0 means palette entry
/// `r`, alpha 1 dim, anything else the terminal's default.
const fn ansi(index: u8) -> Color {
    Color { r: index, g: 0, b: 0, a: 0 }
}
const DIM: Color = Color { r: 0, g: 0, b: 0, a: 1 };
const DEFAULT: Color = Color { r: 0, g: 0, b: 0, a: 2 };

/// Scopes and their looks, most common first; syntect picks the most specific match.
const RULES: &[(&str, Color, Option<FontStyle>)] = &[
    ("comment, punctuation.definition.comment", DIM, None),
    ("string, constant.character.escape, markup.inserted", ansi(palette::GREEN), None),
    ("keyword, storage, storage.type, keyword.operator.word", ansi(palette::MAGENTA), None),
    ("keyword.operator, punctuation", DEFAULT, None),
    ("constant.numeric, constant.language, constant.character", ansi(palette::YELLOW), None),
    ("entity.name.function, support.function, variable.function", ansi(palette::BLUE), None),
    (
        "entity.name.type, entity.name.class, support.type, support.class, \
         entity.other.inherited-class",
        ansi(palette::CYAN),
        None,
    ),
    ("entity.name.tag, meta.diff.range, meta.diff.header", ansi(palette::CYAN), None),
    ("entity.other.attribute-name, variable.parameter", ansi(palette::YELLOW), None),
    ("markup.deleted, invalid", ansi(palette::RED), None),
    ("markup.heading, markup.bold", DEFAULT, Some(FontStyle::BOLD)),
    ("markup.italic", DEFAULT, Some(FontStyle::ITALIC)),
];

fn theme() -> Theme {
    let scopes = RULES
        .iter()
        .filter_map(|&(selectors, color, font_style)| {
            let scope = selectors.parse::<ScopeSelectors>().ok()?;
            let style = StyleModifier { foreground: Some(color), background: None, font_style };
            Some(ThemeItem { scope, style })
        })
        .collect();
    Theme {
        settings: ThemeSettings { foreground: Some(DEFAULT), ..ThemeSettings::default() },
        scopes,
        ..Theme::default()
    }
}

/// What a fence's language is called in the default set, where it differs.
fn token(language: &str) -> String {
    let lower = language.to_ascii_lowercase();
    let token = match lower.as_str() {
        "ts" | "typescript" | "tsx" | "jsx" | "mjs" | "cjs" | "javascript" | "node" => "js",
        "shell" | "console" | "zsh" | "bash" | "shellscript" | "shell-session" => "sh",
        "c++" => "cpp",
        "golang" => "go",
        "yml" => "yaml",
        "python3" | "py3" => "py",
        other => other,
    };
    token.to_string()
}

/// A code block's highlighter, carrying the parse state from line to line.
pub(super) struct Code {
    lines: HighlightLines<'static>,
}

impl Code {
    /// A highlighter for the language a fence names; none for no language or an unknown one.
    pub(super) fn new(language: &str) -> Option<Code> {
        if language.is_empty()
            || matches!(language, "text" | "txt" | "plain" | "plaintext" | "output")
        {
            return None;
        }
        let syntaxes = SYNTAXES.get_or_init(SyntaxSet::load_defaults_newlines);
        let syntax = syntaxes.find_syntax_by_token(&token(language))?;
        Some(Code { lines: HighlightLines::new(syntax, THEME.get_or_init(theme)) })
    }

    /// One line of code, without its newline.
    pub(super) fn line(&mut self, code: &str) -> Vec<Span> {
        let Some(syntaxes) = SYNTAXES.get() else {
            return vec![Span::new(code, Attr::default())];
        };
        let line = format!("{code}\n");
        match self.lines.highlight_line(&line, syntaxes) {
            Ok(ranges) => ranges
                .into_iter()
                .map(|(style, text)| {
                    let mut attr = Attr::default();
                    match style.foreground.a {
                        0 => attr.fg = Some(style.foreground.r),
                        1 => attr.dim = true,
                        _ => {}
                    }
                    attr.bold = style.font_style.contains(FontStyle::BOLD);
                    attr.italic = style.font_style.contains(FontStyle::ITALIC);
                    attr.underline = style.font_style.contains(FontStyle::UNDERLINE);
                    Span::new(text.trim_end_matches('\n'), attr)
                })
                .filter(|s| !s.text.is_empty())
                .collect(),
            Err(_) => vec![Span::new(code, Attr::default())],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scope_rule_parses() {
        for (selectors, _, _) in RULES {
            assert!(selectors.parse::<ScopeSelectors>().is_ok(), "{selectors}");
        }
        assert_eq!(theme().scopes.len(), RULES.len());
    }

    #[test]
    fn common_languages_are_found() {
        for language in ["rust", "rs", "python", "py", "js", "ts", "sh", "bash", "json", "c"] {
            assert!(Code::new(language).is_some(), "{language}");
        }
        assert!(Code::new("no-such-language").is_none());
        assert!(Code::new("").is_none());
    }
}
