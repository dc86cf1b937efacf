//! The pattern: a regex (or a literal) matched against lines, never across them, with the
//! literals it needs found first so that a buffer without them is skipped.

use std::ops::Range;

use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::Look;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    /// Insensitive unless the pattern has an upper-case letter of its own (not in `\S`, `\W`...).
    Smart,
    Insensitive,
    Sensitive,
}

#[derive(Debug, Clone)]
pub(crate) struct PatternOptions {
    pub case: Case,
    /// The pattern is text, not a regular expression.
    pub fixed: bool,
    /// Match whole words only.
    pub word: bool,
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub(crate) struct Matcher {
    pub(super) regex: Regex,
    /// Whether the pattern can assert the start of a line. An escaped content line is the line
    /// as written plus one leading backslash, which changes no match except one that needs the
    /// line to start there (`\b` sees a non-word character either way); only then must escaped
    /// lines be looked at one by one.
    pub(super) line_start: bool,
}

impl Matcher {
    /// Compiles a pattern; the error says what is wrong with it, for a person.
    pub(crate) fn new(pattern: &str, opts: &PatternOptions) -> Result<Matcher, String> {
        let (source, upper) = if opts.fixed {
            if pattern.contains('\n') {
                return Err(LINE_BREAK.into());
            }
            (regex::escape(pattern), pattern.chars().any(char::is_uppercase))
        } else {
            // Parsed alone first: wrapped for -w, a stray `)` would change its meaning.
            let parsed = ast::parse::Parser::new().parse(pattern).map_err(|e| e.to_string())?;
            let seen = ast::visit(&parsed, Literals::default()).unwrap_or_default();
            if seen.line_break {
                return Err(LINE_BREAK.into());
            }
            (pattern.to_string(), seen.upper)
        };
        let insensitive = match opts.case {
            Case::Smart => !upper,
            Case::Insensitive => true,
            Case::Sensitive => false,
        };
        let source =
            if opts.word { format!(r"\b{{start-half}}(?:{source})\b{{end-half}}") } else { source };
        let line_start = regex_syntax::ParserBuilder::new()
            .utf8(false)
            .multi_line(true)
            .crlf(true)
            .case_insensitive(insensitive)
            .build()
            .parse(&source)
            .map_or(true, |hir| {
                let looks = hir.properties().look_set();
                looks.contains(Look::Start)
                    || looks.contains(Look::StartLF)
                    || looks.contains(Look::StartCRLF)
            });
        let regex = RegexBuilder::new(&source)
            .case_insensitive(insensitive)
            // A buffer of many lines is searched at once: `^` and `$` are about lines. With
            // CRLF mode the buffer finds every match a line has without its `\r\n` (`$` before
            // `\r`), and each hit is checked on the line alone.
            .multi_line(true)
            .crlf(true)
            .build()
            .map_err(|e| match e {
                regex::Error::CompiledTooBig(limit) => format!(
                    "the pattern is too large once compiled (the limit is {} MiB); make it smaller",
                    limit >> 20
                ),
                other => other.to_string(),
            })?;
        Ok(Matcher { regex, line_start })
    }

    /// Where the pattern matches in one line.
    pub(crate) fn find_in(&self, line: &[u8], found: &mut Vec<Range<usize>>) {
        found.clear();
        found.extend(self.regex.find_iter(line).map(|m| m.range()));
    }
}

const LINE_BREAK: &str =
    "the pattern holds a line break, which no line can match: cca grep matches one line at a time";

/// What smart case and the line-break check need to know of a pattern's literal characters.
#[derive(Default)]
struct Literals {
    upper: bool,
    line_break: bool,
}

impl Literals {
    fn see(&mut self, c: char) {
        self.upper |= c.is_uppercase();
        self.line_break |= c == '\n';
    }
}

impl ast::Visitor for Literals {
    type Output = Literals;
    type Err = ();

    fn finish(self) -> Result<Literals, ()> {
        Ok(self)
    }

    fn visit_pre(&mut self, ast: &Ast) -> Result<(), ()> {
        if let Ast::Literal(lit) = ast {
            self.see(lit.c);
        }
        Ok(())
    }

    fn visit_class_set_item_pre(&mut self, item: &ast::ClassSetItem) -> Result<(), ()> {
        // A class may hold a line break (it can still match other characters); only its
        // letters count for smart case.
        match item {
            ast::ClassSetItem::Literal(lit) => self.upper |= lit.c.is_uppercase(),
            ast::ClassSetItem::Range(range) => {
                self.upper |= range.start.c.is_uppercase() || range.end.c.is_uppercase();
            }
            _ => {}
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
