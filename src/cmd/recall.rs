//! `cca recall`: the exchanges that best answer a question, ranked by `crate::recall`, printed
//! for a person (through the pager on a terminal) or as one JSON array for scripts.

use std::io::{IsTerminal, Write};

use anyhow::Result;
use serde_json::json;

use crate::cli::RecallArgs;
use crate::config::Flags;
use crate::error::{Failure, exit};
use crate::front::terminal::say;
use crate::recall::{self, Filter, Found, Progress};
use crate::render::clean_text;
use crate::session::settings;

/// What to do about a question that can find nothing (`recall::why_nothing_can_be_found`).
pub(crate) const UNSEARCHABLE_HINT: &str = "ask with a word the exchange would hold (a name, a term, an error), or find exact text with `cca grep`";

/// `cca recall`
pub(crate) fn run(args: &RecallArgs) -> Result<u8> {
    if args.limit == 0 {
        anyhow::bail!(
            Failure::usage("`-n 0` shows no exchanges")
                .hint("`-n N` shows the best N (10 without it)")
        );
    }
    let (settings, store) = settings(&Flags::default())?;
    let now = settings.now();
    let (since, until) = args.span.parse(now)?;
    let folder = match (&args.folder, args.here) {
        (_, true) => Some(crate::session::current_dir()?),
        (Some(dir), false) => Some(crate::session::named_folder(dir)?),
        (None, false) => None,
    };
    let (engine, note) = crate::session::engine_filter(&store, args.engine.as_deref());
    if let Some(note) = note {
        say(&format!("cca: {note}"));
    }
    let filter = Filter {
        folder,
        engine,
        since: since.map(|t| t.timestamp()),
        until: until.map(|t| t.timestamp()),
    };
    let question = args.question.join(" ");
    if question.trim().is_empty() {
        anyhow::bail!(
            Failure::usage("the question is empty").hint(
                "give words to find: cca recall \"when did we move the retry into the client\""
            )
        );
    }
    let bar = Bar::new(!args.json && std::io::stderr().is_terminal() && !settings.dumb_terminal);
    let found = recall::recall(&store, None, &question, &filter, args.limit, now, &bar)?;
    if let Some(why) = recall::why_nothing_can_be_found(&question).filter(|_| found.is_empty()) {
        say(&format!("cca: {why}. Hint: {UNSEARCHABLE_HINT}"));
    } else if found.is_empty() {
        // Nothing, within the filters given: they may be what left everything out.
        let given: Vec<&str> = [
            ("--here", args.here),
            ("--folder", args.folder.is_some()),
            ("--engine", args.engine.is_some()),
            ("--since", args.span.since.is_some()),
            ("--until", args.span.until.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect();
        if !given.is_empty() {
            say(&format!(
                "cca: nothing found within {}; without them, `cca recall` searches every session",
                given.join(", ")
            ));
        }
        // A folder gone since (its sessions are still found) or mistyped: said which.
        if let Some(folder) = filter.folder.as_ref().filter(|f| !f.exists()) {
            say(&format!("cca: note: {} is not a folder here (a typo?)", folder.display()));
        }
    }
    if args.json {
        let list: Vec<_> = found.iter().map(as_json).collect();
        super::print(&format!("{}\n", serde_json::Value::Array(list)))?;
        return Ok(exit::OK);
    }
    let on_terminal = std::io::stdout().is_terminal();
    let write = |out: &mut dyn Write| -> Result<()> {
        if found.is_empty() {
            writeln!(
                out,
                "Nothing found for: {}",
                crate::transcript::one_line(&clean_text(&question), 200)
            )?;
        }
        for f in &found {
            write_found(out, f, settings.color && on_terminal)?;
        }
        Ok(())
    };
    if on_terminal && (!settings.dumb_terminal || settings.pager.is_some()) {
        crate::run::page(settings.pager.as_deref(), write)?;
    } else {
        super::print_with(write)?;
    }
    Ok(exit::OK)
}

/// The contract scripts rely on: `session`, `exchange`, `score`, `at`, `excerpt` at least.
fn as_json(f: &Found) -> serde_json::Value {
    json!({
        "session": f.session,
        "name": f.header.name,
        "title": f.header.title,
        "exchange": f.exchange,
        "at": f.at,
        "answered": f.answered,
        "score": f.score,
        "excerpt": f.excerpt,
        "also_in": f.also_in,
    })
}

fn write_found(out: &mut dyn Write, f: &Found, bold: bool) -> Result<()> {
    let name = f.header.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
    let at = f.at.as_deref().map(|a| format!(" · {a}")).unwrap_or_default();
    let answered = if f.answered { "" } else { " · not answered" };
    let head = format!(
        "{}{name} · exchange {}{at}{answered} · score {:.2} · {}",
        f.session,
        f.exchange,
        f.score,
        crate::transcript::one_line(&f.header.title, 80)
    );
    let head = clean_text(&head);
    if bold {
        writeln!(out, "\x1b[1m{head}\x1b[0m")?;
    } else {
        writeln!(out, "{head}")?;
    }
    for line in clean_text(&f.excerpt).lines() {
        writeln!(out, "  {line}")?;
    }
    if !f.also_in.is_empty() {
        writeln!(out, "  the same exchange is also in {}", f.also_in.join(", "))?;
    }
    // Not `cca show ID | exchange N`, which read as a pipe into a command `exchange`.
    writeln!(out, "  [all of it: exchange {} of `cca show {}`]\n", f.exchange, f.session)?;
    Ok(())
}

/// A progress bar on stderr while a first build reads many sessions; notes go above it.
struct Bar {
    bar: Option<indicatif::ProgressBar>,
}

impl Bar {
    fn new(drawn: bool) -> Bar {
        let bar = drawn.then(|| {
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::stderr(),
            );
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "indexing the transcripts {bar:30} {pos}/{len} sessions · {elapsed}",
            ) {
                bar.set_style(style);
            }
            bar
        });
        Bar { bar }
    }
}

impl Progress for Bar {
    fn note(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| say(&format!("cca: note: {text}"))),
            None => say(&format!("cca: note: {text}")),
        }
    }

    fn reading(&self, done: usize, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    fn finished(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
