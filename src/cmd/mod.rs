//! Runs each command: gathers input, resolves settings, and hands off to `turn` or `store`.
//! One file per group of commands; this one dispatches.

mod chat;
mod config;
mod doctor;
mod export;
mod grep;
mod import;
mod mcp;
pub(crate) mod search;
pub(crate) mod show;
mod steer;

use anyhow::{Context, Result};

use clap::CommandFactory;

use crate::cli::{Cli, Command, CompletionShell};
use crate::config::Flags;
use crate::error::{Failure, exit};
pub(crate) use crate::front::terminal::{print_stdout as print, print_with};
use crate::turn::Target;

pub fn run(cli: Cli) -> Result<u8> {
    match cli.command {
        Command::Search(args) => {
            let target = match (&args.ask.session, args.resume) {
                (Some(id), _) => Target::Session(id.clone()),
                (None, true) => Target::Resume,
                (None, false) => Target::New,
            };
            search::search(&args.ask, target)
        }
        Command::Comma(ask) => {
            let target = ask.session.clone().map_or(Target::Resume, Target::Session);
            search::search(&ask, target)
        }
        Command::Init { shell } => {
            print(crate::shell::init(shell))?;
            Ok(exit::OK)
        }
        Command::Completions { shell } => {
            print(&completions(shell)?)?;
            Ok(exit::OK)
        }
        Command::Doctor => doctor::run(),
        Command::Config => config::run(),
        Command::Chat(args) => chat::run(&args),
        Command::Engine { parent, command } => crate::run::launch(parent, &command),
        Command::Acp(args) => {
            let (settings, store) = crate::session::settings(&flags(&args))?;
            crate::front::acp::serve(settings, store)
        }
        Command::Mcp => mcp::run(),
        Command::Sessions { json, limit, here, engine, since } => {
            show::list(json, limit, here, engine.as_deref(), since.as_deref())
        }
        Command::Grep(args) => grep::run(&args),
        Command::Name { id, name, clear } => show::name(id.as_deref(), name.as_deref(), clear),
        Command::Steer { session, message } => steer::run(session.as_deref(), &message),
        Command::Show { id, raw } => show::show(id.as_deref(), raw),
        Command::Path { id } => show::path(id.as_deref()),
        Command::Fork { id, at } => show::fork(id.as_deref(), at),
        Command::Clear { id } => show::clear(id.as_deref()),
        Command::Compact { id, keep, fail_fast } => show::compact(id.as_deref(), keep, fail_fast),
        Command::Rm { ids, purge } => show::remove(&ids, purge),
        Command::Restore { ids } => show::restore(&ids),
        Command::Import(args) => import::run(&args),
        Command::Export { tool, id } => export::run(tool, id.as_deref()),
        Command::Man => {
            print(&crate::manpage::render(&Cli::command(), crate::manpage::REFERENCE))?;
            Ok(exit::OK)
        }
    }
}

/// The shell code that registers completions; the shell then asks `cca` for candidates.
pub fn completions(shell: CompletionShell) -> Result<String> {
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells.completer(shell.name()).context("a built-in shell")?;
    let mut out = Vec::new();
    completer
        .write_registration(crate::cli::COMPLETE_VAR, "cca", "cca", "cca", &mut out)
        .context("cannot write completions")?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// The settings a turn's options choose.
fn flags(a: &crate::cli::AnswerArgs) -> Flags {
    Flags {
        engine: a.engine.clone(),
        model: a.model.clone(),
        prompt: a.prompt.clone(),
        prompt_file: a.prompt_file.clone(),
        fail_fast: a.fail_fast,
        no_compact: a.no_compact,
        ..Flags::default()
    }
}

/// A point in time as a person types it: `2026-11-21` (local time; the day's start, or its end
/// with `end_of_day`), `2026-11-21 10:15` or `2026-11-21T10:15:00` (local), RFC 3339, or a time
/// ago: `30m`, `12h`, `3d`, `2w`.
pub fn parse_date(
    text: &str,
    now: chrono::DateTime<chrono::Utc>,
    end_of_day: bool,
) -> Result<chrono::DateTime<chrono::Utc>> {
    use chrono::{Local, NaiveDate, NaiveDateTime, TimeDelta, TimeZone, Utc};
    let t = text.trim();
    let local = |naive: NaiveDateTime| Local.from_local_datetime(&naive).earliest();
    let ago = t.find(|c: char| !c.is_ascii_digit()).filter(|&i| i > 0).and_then(|i| {
        let n: i64 = t[..i].parse().ok()?;
        match &t[i..] {
            "m" => TimeDelta::try_minutes(n),
            "h" => TimeDelta::try_hours(n),
            "d" => TimeDelta::try_days(n),
            "w" => TimeDelta::try_weeks(n),
            _ => None,
        }
    });
    let when = if let Some(ago) = ago {
        now.checked_sub_signed(ago)
    } else if let Ok(t) = chrono::DateTime::parse_from_rfc3339(t) {
        Some(t.with_timezone(&Utc))
    } else if let Some(naive) =
        ["%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M"]
            .iter()
            .find_map(|f| NaiveDateTime::parse_from_str(t, f).ok())
    {
        local(naive).map(|t| t.with_timezone(&Utc))
    } else if let Ok(day) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        let naive = match end_of_day {
            false => day.and_hms_opt(0, 0, 0),
            true => day.and_hms_nano_opt(23, 59, 59, 999_999_999),
        };
        naive.and_then(local).map(|t| t.with_timezone(&Utc))
    } else {
        None
    };
    when.ok_or_else(|| {
        Failure::usage(format!("`{text}` is not a date cca understands"))
            .hint("write 2026-11-21, \"2026-11-21 10:15\", 2026-11-21T10:15:00Z, or a time ago: 3d, 12h, 2w")
            .into()
    })
}

/// The folder cca runs in, for `--here`.
pub fn current_dir() -> Result<std::path::PathBuf> {
    std::env::current_dir().context("cannot tell which folder this is")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_people_write_them() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-21T10:15:00Z").unwrap().to_utc();
        let at = |s: &str| chrono::DateTime::parse_from_rfc3339(s).unwrap().to_utc();
        assert_eq!(parse_date("3d", now, false).unwrap(), at("2026-11-18T10:15:00Z"));
        assert_eq!(parse_date("12h", now, true).unwrap(), at("2026-11-20T22:15:00Z"));
        assert_eq!(parse_date("2w", now, false).unwrap(), at("2026-11-07T10:15:00Z"));
        assert_eq!(parse_date("30m", now, false).unwrap(), at("2026-11-21T09:45:00Z"));
        assert_eq!(
            parse_date("2026-11-20T08:00:00+01:00", now, false).unwrap(),
            at("2026-11-20T07:00:00Z")
        );
        let local = |s: &str| {
            use chrono::TimeZone;
            let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S").unwrap();
            chrono::Local.from_local_datetime(&naive).earliest().unwrap().to_utc()
        };
        assert_eq!(parse_date("2026-11-20", now, false).unwrap(), local("2026-11-20 00:00:00"));
        assert!(parse_date("2026-11-20", now, true).unwrap() > local("2026-11-20 23:59:59"));
        assert_eq!(
            parse_date("2026-11-20 10:15", now, false).unwrap(),
            local("2026-11-20 10:15:00")
        );
        for bad in ["", "yesterday", "3y", "d", "2026-13-01", "-3d"] {
            assert!(parse_date(bad, now, false).is_err(), "{bad}");
        }
    }
}
