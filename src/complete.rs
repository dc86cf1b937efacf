//! Values the shell completes: session ids and names, prompt names, engine names. Called only while
//! answering a completion request, so errors mean "no candidates", never a message.

use crate::config::{Flags, Settings};
use crate::session;
use crate::store::Store;

fn store() -> Option<(Settings, Store)> {
    session::settings(&Flags::default()).ok()
}

/// Session names, then ids newest first: both work wherever a session is asked for.
pub(crate) fn session_ids() -> Vec<String> {
    let Some((_, store)) = store() else { return Vec::new() };
    let mut ids = store.session_ids().unwrap_or_default();
    ids.sort_by(|a, b| b.cmp(a));
    let mut names: Vec<String> =
        store.listing().unwrap_or_default().into_iter().filter_map(|l| l.name).collect();
    names.sort();
    names.extend(ids);
    names
}

/// The ids of the sessions in the trash, newest first, for `cca restore`.
pub(crate) fn trash_ids() -> Vec<String> {
    let Some((_, store)) = store() else { return Vec::new() };
    let mut ids = store.trash_ids();
    ids.reverse();
    ids
}

/// Built-in prompt names and the user's own under `$CCA_HOME/prompts`.
pub(crate) fn prompt_names() -> Vec<String> {
    let own = store().map(|(_, store)| store.prompt_names().unwrap_or_default());
    let mut names = crate::prompt::choices(own.unwrap_or_default());
    names.sort();
    names.dedup();
    names
}

/// claude, gemini, and the engines declared in config.toml.
pub(crate) fn engine_names() -> Vec<String> {
    match store() {
        Some((settings, _)) => settings.engines.into_keys().collect(),
        None => crate::engine::BUILTIN.iter().map(|spec| spec.name.to_string()).collect(),
    }
}
