//! `cca sync`, `cca sync init`, `cca sync status`, `cca sync key`: the terminal's side of
//! `crate::sync`.

use std::io::{IsTerminal, Read};

use anyhow::{Context, Result};

use crate::cli::{SyncAction, SyncArgs};
use crate::config::Flags;
use crate::error::{Failure, exit};
use crate::front::terminal::say;
use crate::human::counted;
use crate::session::settings;
use crate::store::Store;
use crate::sync::{self, Report};

/// `cca sync`
pub(crate) fn run(args: &SyncArgs) -> Result<u8> {
    let (_, store) = settings(&Flags::default())?;
    match &args.action {
        None => {
            let bar = progress_bar(!args.quiet && !args.background);
            let wait = || {
                if !args.quiet {
                    say("cca: another cca sync is running here; waiting for it");
                }
            };
            let report = sync::sync(&store, args.background, wait, &|done, of| {
                if of >= 500 {
                    bar.set_length(of as u64);
                    bar.set_position(done as u64);
                }
            })?;
            bar.finish_and_clear();
            if !args.quiet {
                tell(&store, &report);
            }
            warn_skipped(&report);
            unreadable(&report)?;
            Ok(exit::OK)
        }
        Some(SyncAction::Init(init)) => {
            let key = init.key.as_deref().map(read_key).transpose()?;
            let report =
                sync::init(&store, &init.remote, key.as_deref(), init.plain, init.name.as_deref())?;
            if !args.quiet {
                let status = sync::status(&store)?;
                say(&format!("cca: this machine now syncs with {}", status.remote));
                match status.encrypted {
                    true if report.made_key => say(&format!(
                        "cca: records are encrypted with a new key, kept in {}; `cca sync key` prints it for your other machines",
                        store.sync_dir().join("key").display()
                    )),
                    true => {}
                    false => say(
                        "cca: records are plain: whoever can read the remote can read the conversations",
                    ),
                }
                tell(&store, &report);
            }
            warn_skipped(&report);
            unreadable(&report)?;
            Ok(exit::OK)
        }
        Some(SyncAction::Status) => {
            let status = sync::status(&store)?;
            let last = status.synced_at.as_deref().map_or("never".to_string(), |at| {
                at.replace('T', " ").trim_end_matches('Z').to_string() + " UTC"
            });
            let text = format!(
                "remote:   {}\nmachine:  {}\nrecords:  {}\nlast sync: {last}\nsessions: {} here, {} changed since the last sync\n",
                status.remote,
                status.name,
                if status.encrypted { "encrypted (age)" } else { "plain" },
                status.sessions,
                status.changed,
            );
            super::print(&text)?;
            if status.unpushed {
                super::print(
                    "waiting:  what an earlier sync wrote here has not reached the remote; `cca sync` sends it\n",
                )?;
            }
            Ok(exit::OK)
        }
        Some(SyncAction::Key) => match sync::key(&store)? {
            Some(key) => {
                super::print(&format!("{key}\n"))?;
                if std::io::stdout().is_terminal() {
                    say(
                        "cca: on another machine: cca sync init REMOTE --key KEY (keep the key as secret as an SSH key)",
                    );
                }
                Ok(exit::OK)
            }
            None => Err(Failure::usage("this machine's remote is plain: it has no key")
                .hint("another machine joins it with `cca sync init REMOTE` alone")
                .into()),
        },
    }
}

/// The most of a file or stdin read for a key: a key is one line of under a hundred bytes.
const KEY_FILE_BYTES: u64 = 64 << 10;

/// The key `--key` gives: the key itself, `-` for stdin, or a file holding it.
fn read_key(given: &str) -> Result<String> {
    if given.trim_start().starts_with(crate::sync::KEY_PREFIX) {
        return Ok(given.to_string());
    }
    if given == "-" {
        let mut key = String::new();
        std::io::stdin()
            .take(KEY_FILE_BYTES)
            .read_to_string(&mut key)
            .context("cannot read the key from stdin")?;
        return Ok(key);
    }
    crate::store::read_text_at_most(std::path::Path::new(given), KEY_FILE_BYTES).map_err(|e| {
        Failure::usage(format!("--key {given}: not a key, and no file to read one from ({e:#})"))
            .hint(format!(
                "give the key itself ({}...), a file holding it, or - to read it from stdin",
                crate::sync::KEY_PREFIX
            ))
            .into()
    })
}

/// A sync that left out the sessions of records it cannot read fails, once it has done
/// everything else: the next one looks at them again.
fn unreadable(report: &Report) -> Result<()> {
    let Some(first) = report.unreadable.first() else { return Ok(()) };
    let more = match report.unreadable.len() {
        1 => String::new(),
        n => format!(" (and {} more)", n - 1),
    };
    Err(Failure::new(exit::ERROR, format!("{first}{more}"))
        .hint("its conversation is not brought up to date here until the line is put right on the remote: cca did not write it (someone else wrote to the remote, or it was damaged there); every other conversation was synced")
        .into())
}

/// Warns of the sessions a sync could not send (a transcript that is not UTF-8), `-q` or not:
/// each waits, unsynced, until it is mended.
fn warn_skipped(report: &Report) {
    for (id, why) in &report.skipped {
        say(&format!("cca: warning: not synced: {id}: {why}"));
    }
    if !report.skipped.is_empty() {
        say(
            "hint: mend the file by hand (`cca show --raw ID`, `\"$EDITOR\" \"$(cca path ID)\"`); the next sync takes it up",
        );
    }
}

/// Says what a sync did, a line per kind of change.
fn tell(store: &Store, report: &Report) {
    if report.sent > 0 {
        say(&format!("cca: sent {}", counted(report.sent as u64, "change", "changes")));
    } else if report.sent_earlier {
        say("cca: sent what an earlier sync had ready and could not send");
    }
    let lists = [
        ("new here", &report.new),
        ("continued elsewhere", &report.continued),
        ("moved to the trash elsewhere", &report.removed),
        ("restored elsewhere", &report.restored),
        ("busy (a turn is running), left for the next sync", &report.busy),
    ];
    for (what, ids) in lists {
        // A session continued twice (a push another machine beat) is named once.
        let mut once: Vec<&str> = Vec::new();
        for id in ids {
            if !once.contains(&id.as_str()) {
                once.push(id);
            }
        }
        if !once.is_empty() {
            say(&format!("cca: {what}: {}", once.join(", ")));
        }
    }
    for (fork, session, machine) in &report.forks {
        say(&format!(
            "cca: {session} was continued both here and on {machine}: {machine}'s continuation is the fork {fork}"
        ));
    }
    for (here, id, machine) in &report.same_id {
        say(&format!(
            "cca: {machine} started another conversation in the same second as {id} here, under the same id: it is {here} here"
        ));
    }
    // Names are unique here; one given on two machines (or carried by a fork) is now on two.
    let arrived: Vec<&String> = report
        .new
        .iter()
        .chain(&report.continued)
        .chain(report.forks.iter().chain(&report.same_id).map(|f| &f.0))
        .collect();
    if !arrived.is_empty()
        && let Ok(listed) = store.listing()
    {
        for one in listed.iter().filter(|l| arrived.contains(&&l.id)) {
            let Some(name) = &one.name else { continue };
            if let Some(other) =
                listed.iter().find(|l| l.id != one.id && l.name.as_ref() == Some(name))
                // A fork sync made carries the name of the session it forked from, which
                // keeps it.
                && store.resolve_id(name).is_err()
            {
                say(&format!(
                    "cca: warning: {} and {} are both named {name}; the name finds neither until one is renamed",
                    other.id, one.id
                ));
            }
        }
    }
    if report.remote_refilled {
        say(
            "cca: the remote held nothing of cca's any more (emptied, or made again): this machine sent it every conversation as synced so far",
        );
    }
    match &report.latest_removed {
        Some((id, Some(now))) => say(&format!(
            "cca: `latest` pointed at {id}, moved to the trash elsewhere; it now points at {now}: `,` continues that one"
        )),
        Some((id, None)) => say(&format!(
            "cca: `latest` pointed at {id}, moved to the trash elsewhere; no session is left for `,` to continue"
        )),
        None => {}
    }
    if let Some(latest) = &report.latest {
        say(&format!("cca: `,` now continues {latest}, the conversation continued last"));
    }
    let quiet = report.skipped.is_empty()
        && !report.remote_refilled
        && report.unreadable.is_empty()
        && report.busy.is_empty()
        && report.sent == 0
        && !report.sent_earlier
        && report.new.is_empty()
        && report.continued.is_empty()
        && report.forks.is_empty()
        && report.same_id.is_empty()
        && report.removed.is_empty()
        && report.restored.is_empty();
    if quiet {
        say("cca: up to date");
    }
}

fn progress_bar(drawn: bool) -> indicatif::ProgressBar {
    if !drawn || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar =
        indicatif::ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} sessions · {elapsed}")
    {
        bar.set_style(style);
    }
    bar
}
