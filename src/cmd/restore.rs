//! `cca restore`: sessions brought back from the trash, or, with no id, what the trash holds.

use anyhow::Result;

use super::print;
use crate::cli::RestoreArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::front::terminal::say;
use crate::session::settings;
use crate::transcript::one_line;

/// `cca restore`
pub(crate) fn run(args: &RestoreArgs) -> Result<u8> {
    let ids = &args.ids;
    let (_, store) = settings(&Flags::default())?;
    if ids.is_empty() {
        let trash = store.trash_ids();
        if trash.is_empty() {
            say("cca: the trash is empty");
        } else {
            // Newest first, with what each was about, as `cca sessions` lists them.
            let lines: String = trash
                .iter()
                .rev()
                .map(|id| match store.trashed_header(id) {
                    Some(h) => {
                        // Fields of a file, any text: one line each, as `sessions` shows them.
                        let when = h.created.replace('T', " ").trim_end_matches('Z').to_string();
                        let (when, title) = (one_line(&when, 40), one_line(&h.title, 70));
                        format!("{id}  {when}  {title}\n")
                    }
                    None => format!("{id}  (cannot be read)\n"),
                })
                .collect();
            print(&lines)?;
        }
        return Ok(exit::OK);
    }
    // A session named twice is restored once; none is, unless all can be (as `rm` does). The
    // newest first: with no `latest` left, it is the one `,` continues.
    // Each as a prefix or a name finds it in the trash, as `rm --purge` takes them.
    let mut ids: Vec<String> =
        ids.iter().map(|id| store.resolve_trashed(id)).collect::<Result<_>>()?;
    ids.sort_by_key(|id| std::cmp::Reverse(crate::store::sort_key(id)));
    ids.dedup();
    for id in &ids {
        store.can_restore(id)?;
    }
    for id in &ids {
        store.restore(id)?;
        say(&format!("cca: restored {id}"));
        // Names are unique; one taken while this session was in the trash is now on two.
        let name = store.summarize(id).ok().and_then(|s| s.header.name);
        if let Some(name) = name {
            let listed = store.listing()?;
            if let Some(other) =
                listed.iter().find(|l| l.id != *id && l.name.as_deref() == Some(name.as_str()))
            {
                say(&format!(
                    "cca: warning: {} is named {name} too; the name finds neither until one is renamed",
                    other.id
                ));
                say(&format!("hint: cca name --clear {id}, or cca name {id} NEW-NAME"));
            }
        }
    }
    Ok(exit::OK)
}
