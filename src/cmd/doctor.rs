//! `cca doctor`: what cca finds, and what to do about each problem.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use anyhow::Result;

use crate::cli::DoctorArgs;
use crate::config::Flags;
use crate::error::exit;
use crate::session;
use crate::store::Store;

/// The first line `engine` (found at `path`) says when asked its version the way its config
/// says, `None` in the `Ok` when nothing says how: running a program is not harmless when
/// nothing says what it does with an argument.
fn engine_version(
    settings: &crate::config::Settings,
    store: &Store,
    engine: &crate::engine::EngineConfig,
    path: &std::path::Path,
) -> Option<Result<String, String>> {
    let args: Vec<&str> = engine.version_args.as_ref()?.iter().map(String::as_str).collect();
    // In the home a turn gives it: gemini reads and writes its project list even to say its
    // version, codex its helper programs.
    let (env, _files) = crate::call::home_env(settings, store, engine, path).unwrap_or_default();
    Some(crate::run::first_line_of(path, &args, &env, Duration::from_secs(15)))
}

/// `cca doctor`
pub(crate) fn run(_: &DoctorArgs) -> Result<u8> {
    let (settings, store, broken) = settings()?;
    let mut problems: Vec<String> = broken.iter().cloned().collect();
    let mut suggestions: Vec<String> = Vec::new();
    let mut out = format!("cca {}\n\nengines:\n", env!("CARGO_PKG_VERSION"));

    let default = session::default_engine(&settings);
    let engines: Vec<_> = settings.engines.values().collect();
    // Each asked at once: an engine that hangs at its version holds the report for as long as
    // it is given, not that times the number of engines.
    let versions: Vec<Option<Result<String, String>>> = std::thread::scope(|scope| {
        let asking: Vec<_> = engines
            .iter()
            .map(|engine| {
                let path = crate::run::locate(&settings, engine).ok()?;
                let store = &store;
                let settings = &settings;
                Some(scope.spawn(move || engine_version(settings, store, engine, &path)))
            })
            .collect();
        asking
            .into_iter()
            .map(|asked| asked?.join().unwrap_or_else(|_| Some(Err("cannot ask it".into()))))
            .collect()
    });
    let mut usable = 0;
    for (engine, version) in engines.iter().zip(versions) {
        let mark = if engine.name == default { "  (default)" } else { "" };
        match crate::run::locate(&settings, engine) {
            Ok(path) => {
                usable += 1;
                let version = match version {
                    Some(Ok(version)) => version,
                    Some(Err(why)) => {
                        let asked = std::iter::once(path.display().to_string())
                            .chain(engine.version_args.iter().flatten().cloned())
                            .collect::<Vec<_>>()
                            .join(" ");
                        // One that hangs at its version is likely to hang at a question.
                        if why.contains("did not answer") {
                            problems.push(format!(
                                "engine {}: `{asked}` {}: a turn with it may hang too; check that it runs by hand",
                                engine.name,
                                why.trim_start_matches("it ")
                            ));
                        }
                        format!("version unknown (`{asked}`: {why})")
                    }
                    None => "version not asked (set version_args to ask)".into(),
                };
                out.push_str(&format!(
                    "  {:<8} {}  {version}{mark}\n",
                    engine.name,
                    path.display()
                ));
            }
            Err(e) => {
                let hint = crate::error::hint_of(&e).unwrap_or_default();
                out.push_str(&format!("  {:<8} not found{mark}\n", engine.name));
                if engine.name == default
                    || settings.engine.as_ref().is_some_and(|e| e.value == engine.name)
                {
                    problems.push(format!("{e:#}: {hint}"));
                }
            }
        }
    }
    if usable == 0 {
        let installs: Vec<String> = crate::engine::BUILTIN
            .iter()
            .filter_map(|spec| Some(format!("{} (`{}`)", spec.name, spec.install?)))
            .collect();
        problems.push(format!(
            "no engine is usable: install {}, or declare one in config.toml",
            installs.join(" or ")
        ));
    }

    out.push_str("\nstandby:\n");
    standby_report(&settings, &store, &mut out, &mut suggestions);

    out.push_str(&format!("\nhome: {} ({})\n", store.home.display(), settings.home.source));
    let unwritable = home_report(&store, &mut out, &mut problems);
    let config = store.config_path();
    if broken.is_some() {
        out.push_str(&format!("  config: {} (not used: see problems)\n", config.display()));
    } else if settings.config_loaded {
        out.push_str(&format!("  config: {}\n", config.display()));
        check_mode(&config, 0o077, &mut problems);
    } else {
        out.push_str(&format!("  config: none ({} would be read)\n", config.display()));
    }

    out.push_str(&auto_report(&settings, &store, &mut problems));
    problems.extend(super::import::at_risk(&settings, &store));
    out.push_str(&sync_report(&settings, &store, &mut problems));

    if !suggestions.is_empty() {
        out.push_str("\nsuggestions:\n");
        for s in &suggestions {
            out.push_str(&format!("  - {s}\n"));
        }
    }
    if problems.is_empty() {
        out.push_str("\nno problems found\n");
    } else {
        out.push_str("\nproblems:\n");
        for p in &problems {
            out.push_str(&format!("  - {p}\n"));
        }
    }
    super::print(&out)?;
    Ok(if usable == 0 || broken.is_some() || unwritable { exit::ERROR } else { exit::OK })
}

/// The settings, as any command has them; when config.toml cannot be read or is wrong, the
/// settings without it and the problem, so that the doctor still looks at everything else.
fn settings() -> Result<(crate::config::Settings, Store, Option<String>)> {
    use crate::config::{self, Env};
    let env = Env::from_process();
    let home = config::home(&env)?;
    let store = Store::new(home.value.clone());
    store.check_home()?;
    let (flags, path) = (Flags::default(), store.config_path());
    let file = store.read_config();
    match file
        .and_then(|file| config::resolve(&env, &flags, home.clone(), path.clone(), file.as_deref()))
    {
        Ok(settings) => Ok((settings, store, None)),
        Err(e) => {
            let problem = format!(
                "{}; everything else here is as with no config.toml",
                crate::error::with_hint(&e)
            );
            let settings = config::resolve(&env, &flags, home, path, None)?;
            Ok((settings, store, Some(problem)))
        }
    }
}

/// Whether this machine syncs, and with what; `sync = "after-turn"` on a machine not set up
/// to sync is a problem: the user believes sessions go somewhere they do not.
fn sync_report(
    settings: &crate::config::Settings,
    store: &Store,
    problems: &mut Vec<String>,
) -> String {
    let line = match crate::sync::status(store) {
        Ok(status) => {
            let last = status.synced_at.map_or("never".to_string(), |at| at.replace('T', " "));
            let when = if settings.sync_after_turn { "after each turn" } else { "by hand" };
            format!("with {} ({when}; last sync {last})", status.remote)
        }
        Err(_) if store.read_sync_state().ok().flatten().is_none() => {
            if settings.sync_after_turn {
                problems.push(
                    "config.toml says sync = \"after-turn\", but this machine is not set up to sync, so nothing is synced: `cca sync init REMOTE` sets it up".into(),
                );
            }
            "not set up (`cca sync init REMOTE`)".to_string()
        }
        Err(e) => {
            problems.push(format!("sync: {}", crate::error::with_hint(&e)));
            "cannot be read (see problems)".to_string()
        }
    };
    format!("\nsync: {line}\n")
}

/// Which tools' conversations arrive as they end (`cca import --auto`).
fn auto_report(
    settings: &crate::config::Settings,
    store: &Store,
    problems: &mut Vec<String>,
) -> String {
    let states: Vec<String> = super::import::targets(settings)
        .iter()
        .map(|t| {
            let (state, problem) = super::import::state(settings, store, t);
            problems.extend(problem);
            format!("{} {state}", t.name())
        })
        .collect();
    format!("\nauto import (cca import --auto on|off): {}\n", states.join(", "))
}

/// What waits on standby; for an engine with standby off that takes long to start (measured:
/// started as a standby starts it, no question asked), the suggestion to turn it on.
fn standby_report(
    settings: &crate::config::Settings,
    store: &Store,
    out: &mut String,
    suggestions: &mut Vec<String>,
) {
    let waiting = crate::run::standby::waiting(&store.standby_dir());
    for w in &waiting {
        out.push_str(&format!("  {}\n", super::standby::describe(w)));
    }
    if waiting.is_empty() {
        out.push_str("  nothing waits\n");
    }
    for engine in settings.engines.values().filter(|e| e.standby.is_none()) {
        if crate::run::locate(settings, engine).is_err() {
            continue;
        }
        let Some(Ok(took)) = crate::call::time_start(settings, store, engine) else { continue };
        let name = &engine.name;
        out.push_str(&format!("  {name:<8} off; it takes {:.2} s to start\n", took.as_secs_f64()));
        if took > SLOW_START {
            suggestions.push(format!(
                "{name} takes {:.1} s to start before each one-shot turn: `standby = \"10m\"` under \
                 [engines.{name}] in config.toml keeps one started for the next (`cca standby \
                 --help`)",
                took.as_secs_f64()
            ));
        }
    }
}

/// A start slower than this is worth a standby.
const SLOW_START: Duration = Duration::from_millis(300);

/// The home's state; true when cca cannot write there (then nothing works).
fn home_report(store: &Store, out: &mut String, problems: &mut Vec<String>) -> bool {
    if !store.home.exists() {
        out.push_str("  not created yet (the first `cca search` creates it, private to you)\n");
        return false;
    }
    let mut unwritable = false;
    for dir in [store.home.clone(), store.sessions_dir()] {
        check_mode(&dir, 0o077, problems);
        unwritable |= !writable(&dir, problems);
    }
    let ids = store.session_ids().unwrap_or_default();
    out.push_str(&format!("  sessions: {}\n", ids.len()));
    match store.listing() {
        Ok(listed) => {
            // A file the listing could not look at (a link to nothing) is in no list at all.
            let seen: std::collections::HashSet<&str> =
                listed.iter().map(|l| l.id.as_str()).collect();
            for id in ids.iter().filter(|id| !seen.contains(id.as_str())) {
                let path = store.session_path(id);
                let why = match (std::fs::read_link(&path), std::fs::metadata(&path)) {
                    (Ok(target), Err(_)) => {
                        format!("it is a link to {}, which is not there", target.display())
                    }
                    (_, Err(e)) => e.to_string(),
                    (_, Ok(_)) => continue,
                };
                problems.push(format!(
                    "session {id} cannot be listed: {why}; put back what it pointed at, or remove it (`rm {}`)",
                    crate::human::shell_word(&path.to_string_lossy())
                ));
            }
            for l in listed {
                let Some(why) = l.unreadable else { continue };
                problems.push(format!(
                    "session {id} cannot be read: {why}; look at it with `cca show --raw {id}`, \
                     fix it by hand (`\"$EDITOR\" \"$(cca path {id})\"`) or remove it (`cca rm {id}`)",
                    id = l.id
                ));
            }
        }
        Err(e) => problems.push(format!("cannot list the sessions: {e:#}")),
    }
    match store.latest() {
        Ok(Some(id)) => out.push_str(&format!("  latest: {id}\n")),
        Ok(None) => out.push_str("  latest: none yet\n"),
        Err(e) => problems.push(format!(
            "{e:#}: start a new session, or remove {}",
            store.latest_path().display()
        )),
    }
    let exposed: Vec<String> = ids
        .iter()
        .map(|id| store.session_path(id))
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o077 != 0))
        .map(|p| p.display().to_string())
        .collect();
    if !exposed.is_empty() {
        let shown: Vec<&str> = exposed.iter().take(5).map(String::as_str).collect();
        problems.push(format!(
            "{} can be read by others ({}{}): run `chmod 600 {}/session_*.md`",
            crate::human::counted(exposed.len() as u64, "transcript", "transcripts"),
            shown.join(", "),
            if exposed.len() > 5 { ", ..." } else { "" },
            crate::human::shell_word(&store.sessions_dir().to_string_lossy())
        ));
    }
    let leftovers = store.leftovers();
    if !leftovers.is_empty() {
        problems.push(format!(
            "{} left by an interrupted cca ({}); {} safe to delete",
            crate::human::counted(leftovers.len() as u64, "temporary file", "temporary files"),
            leftovers
                .iter()
                .take(3)
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if leftovers.len() == 1 { "it is" } else { "they are" }
        ));
    }
    unwritable
}

/// A folder cca writes in that this user cannot write (made read-only, another user's): every
/// turn would fail.
fn writable(dir: &std::path::Path, problems: &mut Vec<String>) -> bool {
    use rustix::fs::{Access, access};
    let writable = !dir.is_dir() || access(dir, Access::WRITE_OK | Access::EXEC_OK).is_ok();
    if !writable {
        problems.push(format!(
            "{} cannot be written by you, so no turn can be kept: give it back with `chmod u+rwx {}`, or point CCA_HOME elsewhere",
            dir.display(),
            crate::human::shell_word(&dir.to_string_lossy())
        ));
    }
    writable
}

fn check_mode(path: &std::path::Path, forbidden: u32, problems: &mut Vec<String>) {
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & forbidden != 0 {
            let want = if meta.is_dir() { "700" } else { "600" };
            problems.push(format!(
                "{} can be read by others (mode {mode:o}): run `chmod {want} {}`",
                path.display(),
                crate::human::shell_word(&path.to_string_lossy())
            ));
        }
    }
}
