//! `cca rm`: sessions moved to the trash, or deleted with `--purge`.

use anyhow::Result;

use crate::cli::RmArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::front::terminal::{say, say_waiting};
use crate::session::settings;
use crate::store::Repointed;

/// `cca rm`
pub(crate) fn run(args: &RmArgs) -> Result<u8> {
    let (ids, purge) = (&args.ids, args.purge);
    let (settings, store) = settings(&Flags::default())?;
    // Resolve all first: one bad id removes nothing. With --purge, a session in the trash is
    // found there.
    let mut found: Vec<(String, bool)> = ids
        .iter()
        .map(|id| match store.resolve_id(id) {
            Ok(id) => Ok((id, false)),
            Err(e) if purge => store.resolve_trashed(id).map(|id| (id, true)).map_err(|_| e),
            Err(e) => Err(e),
        })
        .collect::<Result<_>>()?;
    // A session named twice (its id and its name, or the same id again) is removed once.
    let mut seen = std::collections::HashSet::new();
    found.retain(|(id, _)| seen.insert(id.clone()));
    for (id, trashed) in &found {
        // An engine on standby holds the conversation (its history, in its memory): it ends
        // with it.
        crate::run::standby::end_session(&store.standby_dir(), id);
        if *trashed {
            store.purge_trashed(id)?;
            say(&format!("cca: deleted {id} (it was in the trash)"));
            continue;
        }
        let _lock = store.lock(id, true, || say_waiting(id))?;
        let repointed = store.remove(id, purge)?;
        if purge {
            say(&format!("cca: deleted {id}"));
        } else {
            say(&format!(
                "cca: moved {id} to {} (`cca restore {id}` brings it back)",
                store.trash_dir().display()
            ));
        }
        // `,` followed the removed session: never a silent switch to another conversation.
        let followed_by_env = settings.session.is_some();
        match repointed {
            Repointed::To(now) if !followed_by_env => {
                let title =
                    store.summarize_unlocked(&now).map(|s| s.header.title).unwrap_or_default();
                say(&format!(
                    "cca: `latest` pointed at {id}; it now points at {now} ({title}): `,` continues that one"
                ));
                say(
                    "hint: continue another with `cca search -s ID`, or `cca sessions` to see them",
                );
            }
            Repointed::Nowhere if !followed_by_env => {
                say("cca: no session is left: `,` has nothing to continue until a new one starts");
            }
            _ => {}
        }
    }
    // Under sync, the other machines hold their copies (a removal reaches them as a move to
    // their trash), and the remote its sealed records: deleted here is not gone everywhere.
    if purge && store.read_sync_state().is_ok_and(|s| s.is_some()) {
        say(
            "cca: note: this machine syncs: the next `cca sync` moves these sessions to the trash on your other machines; delete them there with `cca rm --purge` too. The remote keeps their sealed records",
        );
    }
    Ok(exit::OK)
}
