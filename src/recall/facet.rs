//! What an exchange is counted and filtered on: a term each in one field of the index, its
//! kind first (each field indexed costs a segment's writing, which a search after a turn pays).

use tantivy::Term;
use tantivy::schema::Field;

/// A term of the index's `facets` field.
pub(super) enum Facet<'a> {
    /// On the first exchange of each session: how many sessions there are, for their scores
    /// ([`super::sessions`]).
    First,
    Engine(&'a str),
    /// The session's folder and every folder above it, so "this folder or below" is one term.
    Folder(&'a str),
}

impl Facet<'_> {
    /// Its text, its kind first: a folder named like an engine is not one.
    pub(super) fn text(&self) -> String {
        match self {
            Facet::First => "first".to_string(),
            Facet::Engine(engine) => format!("engine {engine}"),
            Facet::Folder(folder) => format!("folder {folder}"),
        }
    }

    pub(super) fn term(&self, field: Field) -> Term {
        Term::from_field_text(field, &self.text())
    }
}
