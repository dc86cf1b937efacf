//! `cca export` with files of the wrong shape and names that would leave the tools' folders:
//! each is an error that says what to do, and nothing is written (the real claude and gemini
//! resuming what cca exported are in tests/real/import.rs).

use std::path::{Path, PathBuf};

use crate::common::*;

/// Every file under `dir`, for proof that nothing was written.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// A session with one answered question, in the test's work folder.
fn answered(env: &TestEnv) -> String {
    env.run(&["search", "-q", "hello"]).ok();
    STAMP.to_string()
}

#[test]
fn a_gemini_projects_file_of_the_wrong_shape_is_an_error_and_nothing_is_written() {
    let env = TestEnv::new();
    answered(&env);
    let registry = env.home.join(".gemini/projects.json");
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    let work = env.work.to_str().unwrap();
    for shape in [
        "[]".to_string(),
        "\"projects\"".to_string(),
        r#"{"projects": []}"#.to_string(),
        r#"{"projects": "x"}"#.to_string(),
        format!(r#"{{"projects": {{"{work}": 5}}}}"#),
    ] {
        std::fs::write(&registry, &shape).unwrap();
        let run = env.run(&["export", "gemini"]);
        run.code(1).stderr_has(&format!("{} is not gemini's list of projects", registry.display()));
        assert_eq!(run.stdout, "", "{shape}: {run}");
        assert_eq!(
            files_under(&env.home.join(".gemini")),
            std::slice::from_ref(&registry),
            "{shape}"
        );
        assert_eq!(std::fs::read_to_string(&registry).unwrap(), shape);
    }
}

/// gemini's list of projects kept in a dotfiles repository, as a link (its file there made
/// yet or not): the export registers the folder in that file and the link stays.
#[test]
fn a_gemini_projects_file_that_is_a_link_stays_a_link() {
    let env = TestEnv::new();
    answered(&env);
    let registry = env.home.join(".gemini/projects.json");
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    let dotfiles = env.home.join("dotfiles/projects.json");
    std::os::unix::fs::symlink("../dotfiles/projects.json", &registry).unwrap();
    for made in [false, true] {
        env.run(&["export", "gemini"]).ok();
        assert!(std::fs::symlink_metadata(&registry).unwrap().file_type().is_symlink(), "{made}");
        let text = std::fs::read_to_string(&dotfiles).unwrap();
        assert!(text.contains(env.work.to_str().unwrap()), "{made}: {text}");
    }
}

#[test]
fn names_from_files_that_would_leave_the_folder_are_refused() {
    let env = TestEnv::new();
    let id = answered(&env);
    let registry = env.home.join(".gemini/projects.json");
    std::fs::create_dir_all(registry.parent().unwrap()).unwrap();
    let work = env.work.to_str().unwrap();
    std::fs::write(&registry, "{}").unwrap();
    let before = files_under(env.root.path());
    for name in ["../../../../x", "..", ".", "", "a/b", "a\u{0}b"] {
        let text = serde_json::json!({"projects": {work: name}}).to_string();
        std::fs::write(&registry, &text).unwrap();
        let run = env.run(&["export", "gemini"]);
        run.code(1).stderr_has("which is not a file name").stderr_has("fix that name in");
        assert_eq!(files_under(env.root.path()), before, "{name:?}: {run}");
    }
    std::fs::remove_file(&registry).unwrap();

    // A time that is not one, in the transcript: gemini's file name is made from it, claude's
    // lines carry it.
    let path = env.session_path(&id);
    let text = std::fs::read_to_string(&path).unwrap();
    let before = files_under(env.root.path());
    for at in ["../../../../../x", "2026-11-21T10:15", "\u{1b}]0;title\u{7}"] {
        let mut bad = text.clone();
        let first = bad.find("\"at\":\"").unwrap() + 6;
        let end = first + bad[first..].find('"').unwrap();
        bad.replace_range(first..end, serde_json::to_string(at).unwrap().trim_matches('"'));
        std::fs::write(&path, &bad).unwrap();
        for tool in ["gemini", "claude", "codex"] {
            let run = env.run(&["export", tool]);
            run.code(1).stderr_has("exchange 1 of session").stderr_has("not a time");
            assert!(!run.stderr.contains('\u{1b}'), "{run}");
            assert_eq!(files_under(env.root.path()), before, "{tool} {at:?}: {run}");
        }
    }
    std::fs::write(&path, &text).unwrap();
    let run = env.run(&["export", "gemini"]);
    assert_eq!(run.ok().stdout.trim().len(), 36, "{run}");
    let written = files_under(&env.home.join(".gemini/tmp/work/chats"));
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0].file_name().unwrap().to_str().unwrap();
    assert!(name.starts_with("session-2026-11-21T10-15-"), "{name}");
    // codex's rollout goes under the first question's day, named by its second and the id.
    let uuid = env.run(&["export", "codex"]).ok().stdout.trim().to_string();
    let written = files_under(&env.home.join(".codex/sessions/2026/11/21"));
    assert_eq!(written.len(), 1, "{written:?}");
    let name = written[0].file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("rollout-2026-11-21T10-15-") && name.ends_with(&format!("-{uuid}.jsonl")),
        "{name}"
    );
}

/// The tools resume what cca exported, and their end-of-session hook imports it: what was
/// cca's is not imported again as a copy.
#[test]
fn a_session_exported_then_imported_is_not_copied() {
    let env = TestEnv::new();
    answered(&env);
    // An exchange with stdin attached: the tools get it inside the question.
    env.run_with(&["search", "-q", "-r", "review this"], Some(b"some diff\n"), &[]).ok();
    let sessions = || {
        let files = files_under(&env.cca_home.join("sessions"));
        files.iter().filter(|f| f.extension().is_some_and(|e| e == "md")).count()
    };
    for tool in ["claude", "gemini", "codex"] {
        env.run(&["export", tool]).ok();
        let run = env.run(&["import", tool]);
        run.ok().stderr_has("0 new");
        assert_eq!(sessions(), 1, "{tool}: {run}");
    }
    // Imported elsewhere, the model claude's export had to name is not taken for the session's.
    let elsewhere = env.cca_home.with_file_name("elsewhere");
    let run =
        env.run_with(&["import", "claude"], None, &[("CCA_HOME", elsewhere.to_str().unwrap())]);
    run.ok().stderr_has("1 new");
    let imported = files_under(&elsewhere.join("sessions"));
    let text = std::fs::read_to_string(
        imported.iter().find(|f| f.extension().is_some_and(|e| e == "md")).unwrap(),
    )
    .unwrap();
    assert!(!text.contains("cca-import"), "{text}");
}

/// An export that fails part-way leaves nothing of itself in the tool's folder: gemini's list
/// of projects is not changed when its conversation cannot be written, and no conversation is
/// written when cca cannot note the export (a later import would take it for another's).
#[test]
fn an_export_that_fails_leaves_nothing_in_the_tools_folder() {
    let env = TestEnv::new();
    answered(&env);
    let gemini = env.home.join(".gemini");
    std::fs::create_dir_all(&gemini).unwrap();
    let registry = gemini.join("projects.json");
    std::fs::write(&registry, "{\"projects\": {}}\n").unwrap();
    // A file where gemini keeps its projects' folders: the conversation cannot be written.
    std::fs::write(gemini.join("tmp"), "not a folder").unwrap();
    env.run(&["export", "gemini"]).code(1);
    assert_eq!(std::fs::read_to_string(&registry).unwrap(), "{\"projects\": {}}\n");
    assert_eq!(files_under(&gemini), [registry.clone(), gemini.join("tmp")]);
    // Nor is the export noted: its note is taken back.
    let noted = std::fs::read_to_string(env.cca_home.join("imports.json")).unwrap_or_default();
    assert!(!noted.contains("gemini:"), "{noted}");

    // cca's note of its exports cannot be written: nothing goes to claude's folder.
    let notes = env.cca_home.join("imports.json");
    let kept = std::fs::read(&notes).ok();
    let _ = std::fs::remove_file(&notes);
    std::fs::create_dir_all(&notes).unwrap();
    env.run(&["export", "claude"]).code(1);
    assert_eq!(files_under(&env.home.join(".claude")), Vec::<PathBuf>::new());
    std::fs::remove_dir(&notes).unwrap();
    if let Some(kept) = kept {
        std::fs::write(&notes, kept).unwrap();
    }
    let id = env.run(&["export", "claude"]).ok().stdout.trim().to_string();
    env.run(&["import", "claude"]).ok();
    assert_eq!(env.session_files().len(), 1, "the export is cca's own, not imported: {id}");
}

/// A folder written oddly in the header (`//`, `/./`, `..`) is the folder it names: exported
/// twice, it is one project to gemini; one holding a control character is no folder.
#[test]
fn a_folder_is_exported_under_the_folder_it_names() {
    let env = TestEnv::new();
    let id = answered(&env);
    let path = env.cca_home.join(format!("sessions/session_{id}.md"));
    let text = std::fs::read_to_string(&path).unwrap();
    let work = env.work.to_str().unwrap();
    let cwd = format!("\"cwd\":\"{work}\"");
    assert!(text.contains(&cwd), "{text}");
    for odd in [format!("{work}/."), format!("/{work}//"), format!("{work}/x/..")] {
        std::fs::write(&path, text.replacen(&cwd, &format!("\"cwd\":\"{odd}\""), 1)).unwrap();
        env.run(&["export", "gemini"]).ok();
    }
    let registry = std::fs::read_to_string(env.home.join(".gemini/projects.json")).unwrap();
    let projects: serde_json::Value = serde_json::from_str(&registry).unwrap();
    assert_eq!(projects["projects"].as_object().unwrap().len(), 1, "{registry}");
    assert!(projects["projects"][work].is_string(), "{registry}");
    std::fs::write(&path, text.replacen(&cwd, &format!("\"cwd\":\"{work}\\nx\""), 1)).unwrap();
    env.run(&["export", "claude"]).code(2).stderr_has("no folder to export it under");
}
