//! `cca import`: finds another tool's conversations, reads each with its parser in `import`,
//! and writes it as a session through `store`: new, going on (appended), or a fork.
//!
//! `$CCA_HOME/imports.json` remembers each source file's size and modification time, so a run
//! with nothing new reads no source file at all, and the session each conversation became. It
//! is a cache: without it, the sessions' headers (`imported`) say the same, and it is rebuilt.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

mod auto;
mod hook;

pub(crate) use auto::{at_risk, state, targets};

use super::print;
use crate::cli::{ImportArgs, ImportSource};
use crate::config::{Flags, Settings};
use crate::error::{Failure, exit};
use crate::front::terminal::say;
use crate::human::counted;
use crate::import::{self, Conversation, Exchange, Tool};
use crate::render::{clean_text, shown_id};
use crate::session::settings;
use crate::store::Store;
use crate::transcript::{self, ForkedFrom, Header, Imported};

/// Above this many files, a progress bar shows on a terminal.
const PROGRESS_FROM: usize = 50;
/// The largest file read as one conversation: far past any session the tools write (the
/// largest seen are tens of megabytes), short of what would exhaust the memory.
const MAX_IMPORT_FILE: u64 = 1 << 30;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Index {
    /// `tool:source file` -> its stamp when it was last read whole as that tool's.
    files: BTreeMap<String, Stamp>,
    /// `tool:conversation id` -> the session it became.
    conversations: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    mtime_ns: i128,
}

/// What importing one conversation does.
#[derive(Debug, Clone, PartialEq)]
enum Plan {
    /// Nothing new since the last import.
    Nothing,
    /// Imported before into the session with this id, which is in the trash now: removed by
    /// the user, so not imported again (a new copy would come back beside it at a restore).
    Trashed(String),
    New,
    /// The session goes on: exchanges from this one on are written, the first `again` of them
    /// in place of the session's last (an answer an import caught being written, grown since).
    Append {
        id: String,
        from: usize,
        again: usize,
    },
    /// The session was continued in cca, or the source changed what was imported: a new
    /// session whose first `turn` exchanges are the old one's.
    Fork {
        of: String,
        turn: u64,
    },
}

#[derive(Default)]
struct Tally {
    created: usize,
    appended: usize,
    forked: usize,
    unchanged: usize,
    /// Conversations whose session is in cca's trash: the user removed it, so it stays there.
    trashed: Vec<String>,
    files_with_problems: usize,
}

pub(crate) fn run(args: &ImportArgs) -> Result<u8> {
    if let Some(switch) = args.auto {
        let (settings, store) = settings(&Flags::default())?;
        return auto::switch(&settings, &store, switch);
    }
    if let Some(tool) = args.hook {
        return Ok(hook::hand_over(tool, &args.hook_args));
    }
    let source = args.source.context("no tool named")?;
    if args.hooked {
        return hook::import_ended(source, &args.hook_args);
    }
    import(source, &args.paths, args.dry_run)
}

/// Imports `source`'s conversations from `paths` (its own store when there are none).
fn import(source: ImportSource, paths: &[PathBuf], dry_run: bool) -> Result<u8> {
    let (settings, store) = crate::session::settings_for_import(|e| {
        say(&format!(
            "cca: note: the settings cannot be used ({}); importing without them",
            crate::error::with_hint(e)
        ))
    })?;
    let tool = match source {
        ImportSource::Claude => Tool::Claude,
        ImportSource::Gemini => Tool::Gemini,
        ImportSource::Codex => Tool::Codex,
        ImportSource::Llm => Tool::Llm,
    };
    // One import at a time reads and writes the index: two hooks firing at once must not both
    // find a conversation new.
    let _lock = match dry_run {
        true => None,
        false => Some(store.lock_imports(|| say("cca: waiting for another import to finish"))?),
    };
    // llm's logs are read through llm: without it there is nothing to read.
    let llm = match tool {
        Tool::Llm => Some(llm_program(&settings)?),
        _ => None,
    };
    let Walked { files, skipped, missing } = sources_and_skipped(&settings, tool, paths)?;
    for (path, why) in &skipped {
        warn(path, &format!("passed over: {why}"));
    }
    if let Some(dir) = missing {
        say(&format!(
            "cca: {} does not exist: {} has kept no conversation there; give the files or \
             folders to import from elsewhere",
            dir.display(),
            tool.name()
        ));
    }
    let mut index = load_index(&store, dry_run)?;
    let mut tally = Tally::default();
    let bar = progress_bar(files.len(), crate::front::terminal::spinner_wanted(&settings));
    let mut batch: Vec<Job> = Vec::new();
    let result = (|| -> Result<()> {
        for file in &files {
            bar.inc(1);
            let key = file_key(tool, file);
            // llm's own database (an empty path: llm finds it) is read every time.
            let stamp = match std::fs::metadata(file) {
                _ if file.as_os_str().is_empty() => None,
                Ok(m) => Some(Stamp { size: m.len(), mtime_ns: mtime_ns(&m) }),
                Err(e) => {
                    bar.suspend(|| warn(file, &e.to_string()));
                    tally.files_with_problems += 1;
                    continue;
                }
            };
            if stamp.is_some() && index.stamp(tool, file) == stamp.as_ref() {
                tally.unchanged += 1;
                continue;
            }
            let (conversations, problems) = match read(llm.as_deref(), tool, file) {
                Ok(read) => read,
                Err(e) => {
                    bar.suspend(|| warn(file, &format!("{e:#}")));
                    tally.files_with_problems += 1;
                    continue;
                }
            };
            if !problems.is_empty() {
                tally.files_with_problems += 1;
                // A file that is not the tool's at all (a binary one) would give a warning a
                // line: a few name the kind of trouble, a count says the rest.
                const SHOWN: usize = 5;
                bar.suspend(|| {
                    for p in problems.iter().take(SHOWN) {
                        warn(file, &format!("line {}: {}", p.line, p.message));
                    }
                    if problems.len() > SHOWN {
                        let more = problems.len() - SHOWN;
                        warn(file, &format!("{more} more lines could not be read"));
                    }
                });
            }
            let left_out: u64 = conversations.iter().map(|c| c.figures.left_out).sum();
            if left_out > 0 {
                bar.suspend(|| {
                    warn(
                        file,
                        &format!(
                            "{left_out} token count(s) that make no sense (more than 2^40, or not \
                             a whole number) left out"
                        ),
                    )
                });
            }
            // A file with a conversation left in the trash is read again next time: restored,
            // the session goes on.
            let mut left_in_trash = false;
            for conv in conversations.into_iter().filter(|c| !c.exchanges.is_empty()) {
                let key = conversation_key(tool, &conv);
                if batch.iter().any(|job: &Job| job.key == key) {
                    flush(&settings, &store, tool, &mut batch, &mut index, &bar)?;
                }
                let plan = plan(&store, &index, tool, &conv)?;
                if let Plan::Trashed(id) = plan {
                    tally.trashed.push(id);
                    left_in_trash = true;
                    continue;
                }
                let Some(line) = describe(&plan, tool, &conv) else {
                    tally.unchanged += 1;
                    continue;
                };
                match plan {
                    Plan::New => tally.created += 1,
                    Plan::Append { .. } => tally.appended += 1,
                    Plan::Fork { .. } => tally.forked += 1,
                    Plan::Nothing | Plan::Trashed(_) => {}
                }
                if dry_run {
                    bar.suspend(|| print(&format!("-\t{line}\n")))?;
                } else if plan == Plan::New {
                    // New sessions are written together, a batch at a time (below).
                    batch.push(Job { key, file: file.clone(), conv, line });
                    if batch.len() >= BATCH {
                        flush(&settings, &store, tool, &mut batch, &mut index, &bar)?;
                    }
                } else {
                    let (id, done) = apply(&settings, &store, tool, file, &conv, &plan)?;
                    if done != plan {
                        // Continued in cca while the import waited for the session's lock.
                        tally.appended -= 1;
                        tally.forked += 1;
                    }
                    let line = describe(&done, tool, &conv).unwrap_or(line);
                    index.conversations.insert(key, id.clone());
                    bar.suspend(|| print(&format!("{id}\t{line}\n")))?;
                }
            }
            if let Some(stamp) = stamp.filter(|_| !dry_run && problems.is_empty() && !left_in_trash)
            {
                index.files.remove(&*file.to_string_lossy());
                index.files.insert(key, stamp);
            }
        }
        flush(&settings, &store, tool, &mut batch, &mut index, &bar)
    })();
    bar.finish_and_clear();
    if !dry_run {
        if tally.created + tally.forked > 0 {
            store.sync_sessions()?;
        }
        // Kept even after an error: the sessions written so far are in it.
        store.write_imports(&serde_json::to_string(&index).context("the imports' index")?)?;
    }
    result?;
    let verb = if dry_run { "would import" } else { "imported" };
    say(&format!(
        "cca: {verb} from {}: {} new, {} going on, {} forked, {} unchanged ({})",
        tool.name(),
        tally.created,
        tally.appended,
        tally.forked,
        tally.unchanged,
        counted(files.len() as u64, "file", "files")
    ));
    if let Some(first) = tally.trashed.first() {
        say(&format!(
            "cca: {} in cca's trash, left there: {}. Hint: `cca restore {first}` brings one back, and the next import goes on in it",
            counted(tally.trashed.len() as u64, "conversation is", "conversations are"),
            tally.trashed.join(" ")
        ));
    }
    if tally.files_with_problems > 0 {
        return Err(Failure::new(
            exit::ERROR,
            format!(
                "{} could not be read whole; what they hold besides is imported",
                counted(tally.files_with_problems as u64, "file", "files")
            ),
        )
        .hint("each problem is named above with its line; import again once the file is whole")
        .into());
    }
    Ok(exit::OK)
}

/// New sessions written at once, on several threads: each is a temp file, a write and a rename,
/// mostly waiting on the file system; one sync at the end makes them all durable.
const BATCH: usize = 256;
const WRITERS: usize = 8;

/// A new session to write.
struct Job {
    key: String,
    file: PathBuf,
    conv: Conversation,
    line: String,
}

fn flush(
    settings: &Settings,
    store: &Store,
    tool: Tool,
    batch: &mut Vec<Job>,
    index: &mut Index,
    bar: &indicatif::ProgressBar,
) -> Result<()> {
    let jobs = std::mem::take(batch);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let written: Vec<(usize, Result<String>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..WRITERS.min(jobs.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        done.push((
                            i,
                            apply(settings, store, tool, &job.file, &job.conv, &Plan::New)
                                .map(|(id, _)| id),
                        ));
                    }
                    done
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap_or_default()).collect()
    });
    let mut written = written;
    written.sort_by_key(|(i, _)| *i);
    let mut failed = None;
    for (i, result) in written {
        match result {
            Ok(id) => {
                index.conversations.insert(jobs[i].key.clone(), id.clone());
                bar.suspend(|| print(&format!("{id}\t{}\n", jobs[i].line)))?;
            }
            Err(e) => {
                // Read again next time.
                index.files.remove(&file_key(tool, &jobs[i].file));
                failed = failed.or(Some(e));
            }
        }
    }
    failed.map_or(Ok(()), Err)
}

fn progress_bar(files: usize, drawn: bool) -> indicatif::ProgressBar {
    if files < PROGRESS_FROM || !drawn {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(files as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} files · {elapsed}")
    {
        bar.set_style(style);
    }
    bar
}

/// A warning about a source. What it says may come from the file (an id, a version, a line it
/// could not read) or its name: it goes through `cca show`'s cleaning rule, piped or not, so a
/// crafted file cannot reach the terminal with an escape sequence.
fn warn(file: &Path, text: &str) {
    let name = match file.to_str() {
        // llm's own database, which llm finds.
        _ if file.as_os_str().is_empty() => "llm's logs".into(),
        Some(name) if !name.chars().any(char::is_control) => name.into(),
        _ => format!("{:?}", clean_text(&file.to_string_lossy())),
    };
    say(&format!("cca: warning: {name}: {}", clean_text(text).replace('\n', " ")));
}

/// The `llm` program on PATH, which reads llm's logs for cca.
fn llm_program(settings: &Settings) -> Result<PathBuf> {
    which::which_in("llm", settings.path.as_ref(), "/").map_err(|_| {
        Failure::new(exit::ERROR, "llm is not on PATH: cca reads llm's logs through it")
            .hint("install llm (pipx install llm, or pip install llm), or put the folder it is in on PATH")
            .into()
    })
}

fn mtime_ns(m: &std::fs::Metadata) -> i128 {
    i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec())
}

/// The files to read: those given (folders searched), else the tool's own store.
fn sources(settings: &Settings, tool: Tool, given: &[PathBuf]) -> Result<Vec<PathBuf>> {
    Ok(sources_and_skipped(settings, tool, given)?.files)
}

/// [`sources`], with what was passed over on the way, and why: a folder that cannot be read,
/// a link or a FIFO named like a source.
fn sources_and_skipped(settings: &Settings, tool: Tool, given: &[PathBuf]) -> Result<Walked> {
    let home = || {
        settings.user_home.clone().ok_or_else(|| {
            anyhow::Error::from(
                Failure::usage("cannot tell where your home folder is")
                    .hint("set HOME, or give the files to import"),
            )
        })
    };
    let wanted = |p: &Path| -> bool {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match tool {
            Tool::Claude => name.ends_with(".jsonl"),
            Tool::Gemini => {
                name.starts_with("session-")
                    && (name.ends_with(".jsonl") || name.ends_with(".json"))
            }
            Tool::Codex => name.starts_with("rollout-") && name.ends_with(".jsonl"),
            Tool::Llm => name.ends_with(".db"),
        }
    };
    let mut found = Walked::default();
    if given.is_empty() {
        let (dir, depth) = match tool {
            Tool::Claude => {
                let root = match &settings.claude_home {
                    Some(root) => root.clone(),
                    None => home()?.join(".claude"),
                };
                (root.join("projects"), 1)
            }
            Tool::Gemini => {
                let root = settings.gemini_home.clone().map_or_else(home, Ok)?;
                (root.join(".gemini/tmp"), 2)
            }
            Tool::Codex => {
                let root = match &settings.codex_home {
                    Some(root) => root.clone(),
                    None => home()?.join(".codex"),
                };
                (root.join("sessions"), 3)
            }
            // llm finds its own database.
            Tool::Llm => {
                found.files.push(PathBuf::new());
                return Ok(found);
            }
        };
        walk(&dir, depth, &wanted, &mut found);
        if !dir.exists() {
            found.missing = Some(dir);
        }
    } else {
        for path in given {
            if path.is_dir() {
                // Deep enough for a copy of a whole home (`backup/.codex/sessions/Y/M/D`).
                walk(path, GIVEN_DEPTH, &wanted, &mut found);
            } else if path.exists() {
                found.files.push(path.clone());
            } else {
                return Err(Failure::usage(format!("{} does not exist", path.display()))
                    .hint("give files or folders that exist, or nothing for the tool's own store")
                    .into());
            }
        }
    }
    found.files.sort();
    Ok(found)
}

/// Folders below a folder given to import that are looked into.
const GIVEN_DEPTH: usize = 12;

/// What [`walk`] found: the files to read, and what it passed over, with why.
#[derive(Default)]
struct Walked {
    files: Vec<PathBuf>,
    skipped: Vec<(PathBuf, String)>,
    /// The tool's own folder, looked in for want of files given, when it is not there.
    missing: Option<PathBuf>,
}

/// Files `wanted` in `dir` and up to `depth` folders below it (not following links). A folder
/// that is not there is nothing to import; one that cannot be read, and a link or anything but
/// a regular file named like a source, are passed over and said.
fn walk(dir: &Path, depth: usize, wanted: &dyn Fn(&Path) -> bool, out: &mut Walked) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
        Err(e) => return out.skipped.push((dir.to_path_buf(), format!("cannot be read: {e}"))),
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth > 0 => walk(&path, depth - 1, wanted, out),
            Ok(t) if t.is_file() && wanted(&path) => out.files.push(path),
            // A link may be followed when given by name; a FIFO or a device never is read.
            Ok(t) if t.is_symlink() && wanted(&path) => {
                out.skipped.push((path, "a link; give it by name to import it".into()));
            }
            Ok(t) if !t.is_dir() && wanted(&path) => {
                out.skipped.push((path, "not a regular file".into()));
            }
            _ => {}
        }
    }
}

/// A source's conversations and what could not be read of it.
fn read(
    llm: Option<&Path>,
    tool: Tool,
    file: &Path,
) -> Result<(Vec<Conversation>, Vec<import::Problem>)> {
    if let Some(program) = llm {
        let mut args: Vec<&std::ffi::OsStr> =
            ["logs", "list", "--json", "-n", "0"].iter().map(std::ffi::OsStr::new).collect();
        if !file.as_os_str().is_empty() {
            args.extend([std::ffi::OsStr::new("--database"), file.as_os_str()]);
        }
        let json = crate::run::output_of(program, &args)?;
        return Ok(import::llm::parse(&json));
    }
    let bytes = crate::store::read_at_most(file, MAX_IMPORT_FILE)
        .with_context(|| format!("cannot read {}", file.display()))?;
    let mut conv = match tool {
        Tool::Claude => import::claude::parse(&bytes),
        Tool::Gemini => {
            // gemini keeps the project's folder beside its chats folder.
            let root = file.parent().and_then(Path::parent).map(|p| p.join(".project_root"));
            let hint = root.and_then(|r| std::fs::read_to_string(r).ok());
            import::gemini::parse(&bytes, hint.as_deref().map(str::trim))
        }
        Tool::Codex => import::codex::parse(&bytes),
        Tool::Llm => unreachable!("read above"),
    };
    if conv.id.is_empty() {
        // A file with no id of its own is known by its name.
        conv.id = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    }
    let problems = std::mem::take(&mut conv.problems);
    Ok((vec![conv], problems))
}

fn conversation_key(tool: Tool, conv: &Conversation) -> String {
    format!("{}:{}", tool.name(), conv.id)
}

/// What importing `conv` does, given what was imported of it before.
fn plan(store: &Store, index: &Index, tool: Tool, conv: &Conversation) -> Result<Plan> {
    let Some(id) = index.conversations.get(&conversation_key(tool, conv)) else {
        return Ok(Plan::New);
    };
    let Some(header) = store.header_of(id) else {
        return Ok(match store.trashed_header(id) {
            Some(_) => Plan::Trashed(id.clone()),
            None => Plan::New,
        });
    };
    let Some(imported) = &header.imported else {
        // A session of cca's that `cca export` wrote as this conversation, and the tool then
        // resumed: its own exchanges are not imported again, what the tool added goes on in
        // a fork of it.
        let turn = shared(store, id, &conv.exchanges)?;
        if turn == conv.exchanges.len() {
            return Ok(Plan::Nothing);
        }
        return Ok(Plan::Fork { of: id.clone(), turn: turn as u64 });
    };
    let done = imported.exchanges as usize;
    let same_past =
        done == 0 || conv.exchanges.get(done - 1).is_some_and(|e| e.key == imported.last);
    if same_past && conv.exchanges.len() <= done {
        return Ok(Plan::Nothing);
    }
    let body = std::fs::metadata(store.session_path(id))?.len() - header_end(store, id)?;
    if same_past && body == imported.body {
        return Ok(Plan::Append { id: id.clone(), from: done, again: 0 });
    }
    // The source's last exchange imported changed and nothing else did (its answer was being
    // written when the import read it): in a session only imports wrote, it is read again.
    let turn = match same_past {
        true => done,
        false => {
            let pairs = exchange_pairs(store, id)?;
            let turn = shared_with(&pairs, &conv.exchanges);
            let only_imported = body == imported.body && pairs.len() == done;
            if only_imported && turn == done && conv.exchanges.len() > done {
                return Ok(Plan::Append { id: id.clone(), from: done, again: 0 });
            }
            if only_imported
                && turn + 1 == done
                && conv.exchanges.get(turn).is_some_and(|e| e.question == pairs[turn].0)
            {
                return Ok(Plan::Append { id: id.clone(), from: turn, again: 1 });
            }
            turn
        }
    };
    // Continued in cca, or the source's past changed: as many exchanges as both still share.
    if turn == conv.exchanges.len() {
        return Ok(Plan::Nothing);
    }
    Ok(Plan::Fork { of: id.clone(), turn: turn as u64 })
}

fn header_end(store: &Store, id: &str) -> Result<u64> {
    Ok(store.summarize_unlocked(id)?.header_end)
}

/// How many of `exchanges` the session starts with, word for word.
fn shared(store: &Store, id: &str, exchanges: &[Exchange]) -> Result<usize> {
    Ok(shared_with(&exchange_pairs(store, id)?, exchanges))
}

/// How many of `exchanges` `pairs` start with, word for word.
fn shared_with(pairs: &[(String, String)], exchanges: &[Exchange]) -> usize {
    pairs
        .iter()
        .zip(exchanges)
        .take_while(|((question, answer), e)| *question == e.question && *answer == e.answer)
        .count()
}

/// The session's answered exchanges: each question (with its attachments, as an export gives
/// them to the tool) with its answer.
fn exchange_pairs(store: &Store, id: &str) -> Result<Vec<(String, String)>> {
    let text = crate::store::read_text(&store.session_path(id))?;
    let (t, _) = transcript::parse(&text).map_err(|e| anyhow::anyhow!("{}", e.message))?;
    Ok(crate::cmd::export::question_answer_pairs(&t))
}

/// The line printed for a plan, or `None` when there is nothing to do.
fn describe(plan: &Plan, tool: Tool, conv: &Conversation) -> Option<String> {
    let title = transcript::one_line(conv.title.as_deref().unwrap_or(""), 60);
    let n = conv.exchanges.len() as u64;
    let what = match plan {
        Plan::Nothing | Plan::Trashed(_) => return None,
        Plan::New => format!("new\t{}", counted(n, "exchange", "exchanges")),
        Plan::Append { id, from, again } => {
            let new = counted(n - (*from + *again) as u64, "exchange", "exchanges");
            match again {
                0 => format!("going on in {id}\t+{new}"),
                _ => format!("going on in {id}, its last exchange read again\t+{new}"),
            }
        }
        Plan::Fork { of, turn } => {
            format!("fork of {of} at {turn}\t{}", counted(n, "exchange", "exchanges"))
        }
    };
    // The id is the file's: shown as `cca show` would, and quoted unless plain.
    Some(format!("{what}\t{}:{}\t{title}", tool.name(), shown_id(&conv.id)))
}

/// Writes what the plan says; returns the session written and the plan carried out (a fork
/// instead of going on, when the session was continued in cca after the plan was made).
fn apply(
    settings: &Settings,
    store: &Store,
    tool: Tool,
    file: &Path,
    conv: &Conversation,
    plan: &Plan,
) -> Result<(String, Plan)> {
    let source = match tool {
        Tool::Llm if file.as_os_str().is_empty() => "logs.db".to_string(),
        _ => file.to_string_lossy().into_owned(),
    };
    let mark = |exchanges: usize, body: u64| Imported {
        tool: tool.name().to_string(),
        source: source.clone(),
        conversation: conv.id.clone(),
        lines: conv.lines,
        bytes: conv.bytes,
        last: conv.exchanges[exchanges - 1].key.clone(),
        exchanges: exchanges as u64,
        body,
    };
    let id = match plan {
        Plan::Nothing | Plan::Trashed(_) => unreachable!("nothing to write"),
        Plan::Append { id, from, again } => {
            let lock = store.lock(id, true, || crate::front::terminal::say_waiting(id))?;
            let summary = store.summarize_unlocked(id)?;
            let body = std::fs::metadata(store.session_path(id))?.len() - summary.header_end;
            if summary.header.imported.as_ref().map(|i| i.body) != Some(body) {
                // A turn landed while the lock was awaited: the session is cca's now, and is
                // never rewritten; the source goes on in a fork, as `plan` decides for it.
                drop(lock);
                let turn = shared(store, id, &conv.exchanges)? as u64;
                return apply(
                    settings,
                    store,
                    tool,
                    file,
                    conv,
                    &Plan::Fork { of: id.clone(), turn },
                );
            }
            let tail = import::render_records(tool, &conv.exchanges[*from..], *from as u64 + 1);
            // What is read again goes in place of what it was: the body is kept up to the end
            // of the exchange before it.
            let kept = match (*again, *from) {
                (0, _) => body,
                (_, 0) => 0,
                (_, from) => store.summarize_with_ends(id)?.1[from - 1] - summary.header_end,
            };
            let header = Header {
                imported: Some(mark(conv.exchanges.len(), kept + tail.len() as u64)),
                ..summary.header
            };
            store.rewrite_with(id, &header, summary.header_end, kept, tail.as_bytes())?;
            id.clone()
        }
        Plan::New | Plan::Fork { .. } => {
            let body = import::render_records(tool, &conv.exchanges, 1);
            let forked_from = match plan {
                Plan::Fork { of, turn } => Some(ForkedFrom { session: of.clone(), turn: *turn }),
                _ => None,
            };
            let header = new_header(
                settings,
                tool,
                conv,
                file,
                forked_from,
                mark(conv.exchanges.len(), body.len() as u64),
            );
            let created = chrono::DateTime::parse_from_rfc3339(&header.created)
                .map_or_else(|_| settings.now(), |t| t.to_utc());
            let stamp = created.format("%Y%m%d-%H%M%S").to_string();
            store.create_session_unsynced(&stamp, |id| {
                transcript::render_header(&Header { id: id.to_string(), ..header.clone() }) + &body
            })?
        }
    };
    Ok((id, plan.clone()))
}

/// The header of a session made from `conv`: the engine is the tool (claude and gemini are
/// cca's engines; codex and llm answer once declared in config.toml), the prompt cca's default.
fn new_header(
    settings: &Settings,
    tool: Tool,
    conv: &Conversation,
    file: &Path,
    forked_from: Option<ForkedFrom>,
    imported: Imported,
) -> Header {
    let prompt = crate::prompt::DEFAULT;
    let text = crate::prompt::builtin(prompt).unwrap_or_default();
    let first = conv.exchanges.first();
    // A file with no time that makes sense was last written when its conversation ended.
    let written = || {
        let at = std::fs::metadata(file).and_then(|m| m.modified()).ok()?;
        let at = chrono::DateTime::<chrono::Utc>::from(at);
        // A modification time of 0 (an archive's) is no better a time than none.
        import::rfc3339(&at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
    };
    Header {
        format: transcript::FORMAT,
        id: String::new(),
        created: conv
            .created
            .clone()
            .or_else(|| first.and_then(|e| e.asked.clone()))
            .or_else(written)
            .unwrap_or_else(|| settings.now_string()),
        engine: tool.name().to_string(),
        model: conv.exchanges.iter().find_map(|e| e.model.clone()),
        prompt: prompt.to_string(),
        prompt_hash: crate::prompt::hash(text),
        // Only a folder `--here` can meet: an absolute path (a relative one names none).
        cwd: conv.cwd.clone().filter(|cwd| cwd.starts_with('/')).unwrap_or_default(),
        title: transcript::one_line(
            transcript::title_line(conv.title.as_deref().unwrap_or("")),
            80,
        ),
        forked_from,
        name: None,
        imported: Some(imported),
        other: Default::default(),
    }
}

/// Notes that `cca export` wrote session `id` as `tool`'s conversation `conversation`, so that
/// importing it (the tool resumed it, and its end-of-session hook ran) makes no copy of it.
pub(crate) fn exported(store: &Store, tool: Tool, conversation: &str, id: &str) -> Result<()> {
    note_exported(store, tool, conversation, Some(id))
}

/// Takes back the note [`exported`] made, for an export that failed after it.
pub(crate) fn not_exported(store: &Store, tool: Tool, conversation: &str) -> Result<()> {
    note_exported(store, tool, conversation, None)
}

fn note_exported(store: &Store, tool: Tool, conversation: &str, id: Option<&str>) -> Result<()> {
    let _lock = store.lock_imports(|| say("cca: waiting for an import to finish"))?;
    let mut index = load_index(store, false)?;
    let key = format!("{}:{conversation}", tool.name());
    match id {
        Some(id) => index.conversations.insert(key, id.to_string()),
        None => index.conversations.remove(&key),
    };
    store.write_imports(&serde_json::to_string(&index).context("the imports' index")?)
}

/// A source file's key in the index: read as one tool's, a file is still unread as another's
/// (a folder of backups holding several tools' files, a file given to the wrong tool first).
fn file_key(tool: Tool, file: &Path) -> String {
    format!("{}:{}", tool.name(), file.to_string_lossy())
}

impl Index {
    /// `file`'s stamp when `tool` last read it whole; an index an older cca wrote keys files
    /// by their path alone, which stands until the file is read again.
    fn stamp(&self, tool: Tool, file: &Path) -> Option<&Stamp> {
        let key = file_key(tool, file);
        self.files.get(&key).or_else(|| self.files.get(&*file.to_string_lossy()))
    }
}

/// Which of `tool`'s `files` cca has not imported as they are now (new, or changed since).
pub(crate) fn not_imported(store: &Store, tool: Tool, files: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    let index = load_index(store, true)?;
    Ok(files
        .into_iter()
        .filter(|f| {
            let now =
                std::fs::metadata(f).map(|m| Stamp { size: m.len(), mtime_ns: mtime_ns(&m) }).ok();
            now.is_none() || index.stamp(tool, f) != now.as_ref()
        })
        .collect())
}

/// The index from `imports.json`, or made again from the sessions' headers when it is missing;
/// one that cannot be read is moved aside first (unless `read_only`), since what `cca export`
/// noted in it is in no header.
fn load_index(store: &Store, read_only: bool) -> Result<Index> {
    if let Some(text) = store.read_imports()? {
        match serde_json::from_str::<Index>(&text) {
            Ok(index) => return Ok(index),
            // Kept aside, not written over: it also holds what `cca export` wrote, which no
            // session's header says.
            Err(e) => {
                let path = store.imports_path();
                let aside = path.with_extension("json.damaged");
                if !read_only {
                    std::fs::rename(&path, &aside)
                        .with_context(|| format!("cannot move {} aside", path.display()))?;
                }
                say(&format!(
                    "cca: warning: {} cannot be read ({e}); it is kept as {} and made again from the sessions' headers. Hint: a conversation `cca export` wrote may be imported once more as a new session",
                    path.display(),
                    aside.display()
                ));
            }
        }
    }
    let mut index = Index::default();
    for id in store.session_ids().unwrap_or_default() {
        if let Some(i) = store.header_of(&id).and_then(|h| h.imported) {
            index.conversations.insert(format!("{}:{}", i.tool, i.conversation), id);
        }
    }
    Ok(index)
}
