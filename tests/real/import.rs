//! `cca import` and `cca export` against session files the real `claude`, `gemini` and `llm`
//! wrote (their own session persistence on, as a person runs them), generated as the tests run
//! so they prove the pinned versions; and the engines' own resume of what cca exported.

use super::*;

/// Runs the real engine itself (not through cca), in the test's home and work folder.
fn engine(r: &Real, name: &str, args: &[&str]) -> Run {
    let program = if name == "claude" { &r.claude } else { &r.gemini };
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear()
        .env("HOME", &r.env.home)
        .env("PATH", r.env.path_var())
        .envs(r.vars(&r.api.url()))
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        .current_dir(&r.env.work)
        .args(args)
        .stdin(Stdio::null());
    run_command(cmd, None)
}

/// A question in the engine's own latest session (a new one with `fresh`).
fn ask_engine(r: &Real, name: &str, fresh: bool, question: &str) {
    let args: Vec<&str> = match (name, fresh) {
        ("claude", true) => vec!["-p", "--tools", "WebSearch", "--allowedTools", "WebSearch", "--"],
        ("claude", false) => vec!["-p", "-c", "--"],
        (_, true) => vec!["--skip-trust", "-p"],
        (_, false) => vec!["--skip-trust", "--resume", "latest", "-p"],
    };
    engine(r, name, &[args.as_slice(), &[question]].concat()).ok();
}

fn answer(text: &str) -> Behavior {
    Behavior { answer: Some(text.to_string()), ..Behavior::default() }
}

/// Three turns in the engine's own session, the first with two web searches.
fn record(r: &Real, name: &str) {
    r.api.set(two_searches(name));
    ask_engine(r, name, true, "what changed in file locking?");
    r.api.set(answer("Windows has LockFileEx."));
    ask_engine(r, name, false, "and on windows?");
    r.api.set(answer("macOS has flock."));
    ask_engine(r, name, false, "and on macOS?");
}

/// The engine's own session files under the test's home.
fn own_sessions(r: &Real) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = engine_session_files(r).into_iter().map(PathBuf::from).collect();
    found.sort();
    found
}

fn transcript_of(r: &Real, id: &str) -> cca::transcript::Transcript {
    let text = std::fs::read_to_string(r.env.session_path(id)).unwrap();
    let (t, problems) = cca::transcript::parse(&text).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    t
}

fn questions(t: &cca::transcript::Transcript) -> Vec<String> {
    let user = cca::transcript::Kind::User;
    t.records.iter().filter(|r| r.kind == user).map(|r| r.content.clone()).collect()
}

/// The ids `cca import` printed (first column), each with what it did.
fn imported(run: &Run) -> Vec<(String, String)> {
    run.stdout
        .lines()
        .map(|l| {
            let mut cols = l.split('\t');
            (cols.next().unwrap().to_string(), cols.next().unwrap_or("").to_string())
        })
        .collect()
}

fn import_is_idempotent_incremental_and_forks(name: &str) {
    let r = Real::new();
    record(&r, name);
    assert!(!own_sessions(&r).is_empty(), "{name} kept its own session");

    // 1: one session, from the tool's own store, answers kept as cca keeps its own.
    let run = r.run(&["import", name]);
    run.ok();
    let done = imported(&run);
    assert_eq!(done.len(), 1, "{run}");
    let (id, action) = done[0].clone();
    assert_eq!(action, "new");
    let t = transcript_of(&r, &id);
    assert_eq!(
        questions(&t),
        ["what changed in file locking?", "and on windows?", "and on macOS?"],
        "{name}"
    );
    assert_eq!(
        answers(&t),
        [two_searches_kept(name), "Windows has LockFileEx.".into(), "macOS has flock.".into()]
    );
    let h = &t.header;
    assert_eq!((h.engine.as_str(), h.cwd.as_str()), (name, r.env.work.to_str().unwrap()));
    assert_eq!(h.title, "what changed in file locking?");
    assert!(h.created.starts_with("20"), "the source's time, not cca's clock: {}", h.created);
    assert!(!h.created.starts_with("2026-11-21T10:15"), "{}", h.created);
    let imported_mark = h.imported.as_ref().expect("the source is recorded");
    assert_eq!((imported_mark.tool.as_str(), imported_mark.exchanges), (name, 3));

    // 2: again, nothing; a new turn in the tool goes on in the same session.
    let before = std::fs::read(r.env.session_path(&id)).unwrap();
    let run = r.run(&["import", name]);
    assert_eq!(run.ok().stdout, "", "{run}");
    assert_eq!(std::fs::read(r.env.session_path(&id)).unwrap(), before);
    r.api.set(answer("Linux has flock too."));
    ask_engine(&r, name, false, "and on linux?");
    let run = r.run(&["import", name]);
    assert_eq!(imported(run.ok()), [(id.clone(), "going on in ".to_string() + &id)]);
    let t = transcript_of(&r, &id);
    assert_eq!(questions(&t).last().unwrap(), "and on linux?");
    assert_eq!(answers(&t).last().unwrap(), "Linux has flock too.");
    assert_eq!(r.env.session_files().len(), 1);

    // 3: a session like any other: listed here, searched, named, shown; continued with the
    // engine that wrote it, which gets the imported history.
    let run = r.run(&["sessions", "--here"]);
    assert!(run.ok().stdout.contains(&id), "{run}");
    let run = r.run(&["grep", "LockFileEx"]);
    assert!(run.ok().stdout.contains(&id), "{run}");
    r.run(&["name", &id, "locks"]).ok();
    assert!(r.run(&["show", "locks"]).ok().stdout.contains("macOS has flock."));
    r.api.set(Behavior::default());
    let run = r.run(&["search", "-s", "locks", "and on BSD?"]);
    assert_eq!(run.ok().stdout, "ECHO: and on BSD?", "{run}");
    let body = &r.api.turns().last().unwrap().body.clone();
    let sent = crate::sent_questions(body);
    assert_eq!(sent[0], "what changed in file locking?", "{body}");
    assert_eq!(sent.last().unwrap(), "and on BSD?", "{body}");
    let answers_sent = crate::sent_answers(body);
    assert_eq!(answers_sent[0], two_searches_kept(name), "{body}");
    assert!(answers_sent.iter().any(|a| a == "Linux has flock too."), "{body}");
    assert_eq!(
        transcript_of(&r, &id).header.engine,
        name,
        "continued with the engine that wrote it"
    );

    // 4: continued in cca, then in the tool: the cca session is never rewritten; a fork.
    let before = std::fs::read(r.env.session_path(&id)).unwrap();
    r.api.set(answer("Solaris has fcntl."));
    ask_engine(&r, name, false, "and on Solaris?");
    let run = r.run(&["import", name]);
    let done = imported(run.ok());
    assert_eq!(done.len(), 1, "{run}");
    assert_eq!(done[0].1, format!("fork of {id} at 4"));
    assert_eq!(std::fs::read(r.env.session_path(&id)).unwrap(), before);
    let fork = transcript_of(&r, &done[0].0);
    assert_eq!(
        fork.header.forked_from,
        Some(cca::transcript::ForkedFrom { session: id.clone(), turn: 4 })
    );
    assert_eq!(questions(&fork).len(), 5);
    assert_eq!(r.run(&["import", name]).ok().stdout, "");
}

#[test]
fn claude_sessions_import_incrementally() {
    import_is_idempotent_incremental_and_forks("claude");
}

#[test]
fn gemini_sessions_import_incrementally() {
    import_is_idempotent_incremental_and_forks("gemini");
}

/// gemini deletes sessions of its own when it starts (`general.sessionRetention`, on by default):
/// those last updated over 30 days ago, and every file of a session one of whose files it cannot
/// read, such as the near-empty second file a `--resume` in a later minute leaves (0.61.0). They
/// are the user's, for `cca import`: a gemini that cca starts deletes none of them.
#[test]
fn a_gemini_that_cca_starts_deletes_none_of_gemini_s_own_sessions() {
    let r = Real::new();
    r.api.set(answer("macOS has flock."));
    ask_engine(&r, "gemini", true, "what changed in file locking?");
    let file = own_sessions(&r).remove(0);
    let text = std::fs::read_to_string(&file).unwrap();
    let old = ["\"startTime\":\"", "\"lastUpdated\":\""].iter().fold(text, |text, key| {
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(key) {
            let (head, tail) = rest.split_at(at + key.len());
            out.push_str(head);
            out.push_str("2000-01-01T00:00:00.000Z");
            rest = &tail[tail.find('"').unwrap()..];
        }
        out + rest
    });
    std::fs::write(&file, &old).unwrap();

    r.api.set(Behavior::default());
    r.run(&["search", "-q", "-e", "gemini", "one"]).ok();
    assert_eq!(std::fs::read_to_string(&file).ok().as_deref(), Some(old.as_str()));
    let run = r.run(&["import", "gemini"]);
    assert_eq!(imported(run.ok()).len(), 1, "{run}");
}

/// 4: a file cut off in the middle of a line: named with its line, the rest imported, exit 1,
/// and once the file is whole again the rest goes on in the same session.
#[test]
fn a_truncated_claude_file_imports_what_it_holds() {
    let r = Real::new();
    record(&r, "claude");
    let file = own_sessions(&r).remove(0);
    let whole = std::fs::read(&file).unwrap();
    let text = String::from_utf8(whole.clone()).unwrap();
    let cut = text.find("macOS has flock.").expect("the last answer");
    std::fs::write(&file, &whole[..cut]).unwrap();
    let line = text[..cut].lines().count();
    let run = r.run(&["import", "claude", file.to_str().unwrap()]);
    run.code(1).stderr_has(&format!("{}: line {line}: the line is cut off", file.display()));
    let done = imported(&run);
    assert_eq!(done.len(), 1, "{run}");
    let id = &done[0].0;
    assert_eq!(questions(&transcript_of(&r, id)).len(), 2, "the cut-off exchange waits");

    std::fs::write(&file, &whole).unwrap();
    let run = r.run(&["import", "claude", file.to_str().unwrap()]);
    assert_eq!(imported(run.ok()), [(id.clone(), format!("going on in {id}"))]);
    assert_eq!(answers(&transcript_of(&r, id)).last().unwrap(), "macOS has flock.");

    // --dry-run lists and writes nothing.
    std::fs::remove_file(r.env.cca_home.join("imports.json")).unwrap();
    let other = r.env.root.path().join("other.jsonl");
    std::fs::write(
        &other,
        text.replace(
            &own_sessions(&r)[0].file_stem().unwrap().to_string_lossy().into_owned(),
            "another-id",
        ),
    )
    .unwrap();
    let run = r.run(&["import", "claude", "--dry-run", other.to_str().unwrap()]);
    assert_eq!(imported(run.ok()), [("-".to_string(), "new".to_string())], "{run}");
    assert_eq!(r.env.session_files().len(), 1);
}

/// 5: exported, the engine's own resume reaches the model with the conversation.
fn export_then_resume(name: &str) {
    let r = Real::new();
    r.run(&["search", "-q", "-e", name, "first question"]).ok();
    r.run(&["search", "-q", "-r", "second question"]).ok();
    let run = r.run(&["export", name]);
    let uuid = run.ok().stdout.trim().to_string();
    assert_eq!(uuid.len(), 36, "{run}");
    let files = own_sessions(&r);
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].to_string_lossy().contains(&uuid[..8]), "{files:?}");
    r.api.set(answer("resumed."));
    let args: Vec<&str> = if name == "claude" {
        vec!["-p", "--resume", &uuid, "--", "third question"]
    } else {
        vec!["--skip-trust", "--resume", &uuid, "-p", "third question"]
    };
    let run = engine(&r, name, &args);
    assert_eq!(run.ok().stdout.trim(), "resumed.", "{run}");
    let body = r.api.turns().last().unwrap().body.to_string();
    for said in [
        "first question",
        "ECHO: first question",
        "second question",
        "ECHO: second question",
        "third question",
    ] {
        assert!(body.contains(said), "{name}: the model was not given {said:?}: {body}");
    }
    // Imported after the resume, as the end-of-session hook does: what was cca's is not
    // copied; the engine's turn goes on in a fork of the session.
    let id = r.env.session_files()[0].replace("session_", "").replace(".md", "");
    let run = r.run(&["import", name]);
    assert!(run.ok().stdout.contains(&format!("fork of {id} at 2")), "{name}: {run}");
    assert_eq!(r.env.session_files().len(), 2, "{run}");
}

#[test]
fn claude_resumes_an_exported_session() {
    export_then_resume("claude");
}

#[test]
fn gemini_resumes_an_exported_session() {
    export_then_resume("gemini");
}

/// An old conversation exported to gemini outlives the next gemini's start, which deletes
/// sessions last updated over 30 days ago (`sessionRetention`, on by default).
#[test]
fn an_old_conversation_exported_to_gemini_is_still_there_to_resume() {
    let r = Real::new();
    let mut cmd = r.command();
    cmd.env("CCA_NOW", "2026-01-01T00:00:00Z").args(["search", "-q", "-e", "gemini", "first"]);
    run_command(cmd, None).ok();
    let run = r.run(&["export", "gemini"]);
    let uuid = run.ok().stdout.trim().to_string();
    // The user's own gemini, in a session of its own.
    engine(&r, "gemini", &["--skip-trust", "-p", "another question"]).ok();
    r.api.set(answer("resumed."));
    let run = engine(&r, "gemini", &["--skip-trust", "--resume", &uuid, "-p", "second"]);
    assert_eq!(run.ok().stdout.trim(), "resumed.", "{run}");
    assert!(r.api.turns().last().unwrap().body.to_string().contains("ECHO: first"));
}

/// llm's logs, read through the real llm: one session per conversation.
#[test]
fn llm_conversations_import() {
    let r = Real::new();
    let llm = real_program("CCA_TEST_LLM", "llm-venv/bin/llm");
    let logs = r.env.root.path().join("llm");
    let llm_run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&llm);
        cmd.env_clear().env("LLM_USER_PATH", &logs).args(args).stdin(Stdio::null());
        run_command(cmd, None).ok();
    };
    llm_run(&["-m", "echo", "hello there"]);
    llm_run(&["-m", "echo", "-c", "and more"]);
    llm_run(&["-m", "echo", "another"]);
    let path = format!("{}:{}", llm.parent().unwrap().display(), r.env.path_var());
    let mut cmd = r.command();
    cmd.args(["import", "llm"]).env("PATH", path).env("LLM_USER_PATH", &logs);
    let run = run_command(cmd, None);
    let done = imported(run.ok());
    assert_eq!(done.len(), 2, "{run}");
    let t = transcript_of(&r, &done[0].0);
    assert_eq!(questions(&t), ["hello there", "and more"]);
    assert_eq!(t.header.engine, "llm");
    assert!(answers(&t)[0].contains("\"prompt\": \"hello there\""), "{:?}", answers(&t));
}

/// codex's rollout files, written by the real codex against the loopback Responses API.
#[test]
fn codex_rollouts_import() {
    let r = Real::new();
    let codex = real_program("CCA_TEST_CODEX", "codex/node_modules/.bin/codex");
    let config = r.env.home.join(".codex");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!(
            "model = \"gpt-mock\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\nname = \"mock\"\n\
             base_url = \"{}/v1\"\nenv_key = \"MOCK_API_KEY\"\nwire_api = \"responses\"\n",
            r.api.url()
        ),
    )
    .unwrap();
    let codex_run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(&codex);
        cmd.env_clear()
            .env("HOME", &r.env.home)
            .env("PATH", r.env.path_var())
            .env("MOCK_API_KEY", "dummy")
            .current_dir(&r.env.work)
            .args(args)
            .stdin(Stdio::null());
        run_command(cmd, None)
    };
    codex_run(&["exec", "--skip-git-repo-check", "first question"]).ok();
    codex_run(&["exec", "--skip-git-repo-check", "resume", "--last", "second question"]).ok();
    let run = r.run(&["import", "codex"]);
    let done = imported(run.ok());
    assert_eq!(done.len(), 1, "{run}");
    let t = transcript_of(&r, &done[0].0);
    assert_eq!(questions(&t), ["first question", "second question"]);
    assert_eq!(answers(&t), ["ECHO: first question", "ECHO: second question"]);
    assert_eq!(
        (t.header.engine.as_str(), t.header.cwd.as_str()),
        ("codex", r.env.work.to_str().unwrap())
    );
}
