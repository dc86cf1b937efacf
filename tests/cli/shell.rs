//! Shell integration: completions and the man page come from the clap definition.

use crate::common::*;

#[test]
fn committed_completions_match_the_cli() {
    let env = TestEnv::new();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("completions");
    for (shell, file) in [
        ("bash", "cca.bash"),
        ("zsh", "_cca"),
        ("fish", "cca.fish"),
        ("elvish", "cca.elv"),
        ("powershell", "_cca.ps1"),
    ] {
        let run = env.run(&["completions", shell]);
        run.ok();
        let committed = std::fs::read_to_string(root.join(file)).unwrap();
        assert_eq!(
            run.stdout, committed,
            "completions/{file} is stale: regenerate with `cca completions {shell} > completions/{file}`"
        );
    }
}

#[test]
fn session_ids_and_prompt_names_complete() {
    let env = TestEnv::new();
    env.run(&["search", "one"]).ok();
    env.run(&["search", "two"]).ok();
    std::fs::create_dir_all(env.cca_home.join("prompts/mine")).unwrap();
    std::fs::write(env.cca_home.join("prompts/mine/terse.md"), "be terse").unwrap();
    let complete = |words: &[&str]| {
        let index = (words.len() - 1).to_string();
        let mut args = vec!["--", "cca"];
        args.extend_from_slice(&words[1..]);
        let run = env.run_with(
            &args,
            None,
            &[("CCA_COMPLETE", "bash"), ("_CLAP_COMPLETE_INDEX", &index), ("_CLAP_IFS", "\n")],
        );
        run.ok();
        run.stdout.lines().map(String::from).collect::<Vec<_>>()
    };
    assert_eq!(
        complete(&["cca", "search", "--session", ""]),
        [format!("{STAMP}-2"), STAMP.to_string()]
    );
    let prompts = complete(&["cca", "search", "--prompt", ""]);
    assert!(prompts.contains(&"search_agents/haiku45".to_string()), "{prompts:?}");
    assert!(prompts.contains(&"mine/terse".to_string()), "{prompts:?}");
    let engines = complete(&["cca", "search", "--engine", ""]);
    assert_eq!(engines, ["claude", "gemini"]);
    // `cca restore` is offered the sessions in the trash.
    env.run(&["rm", STAMP]).ok();
    assert_eq!(complete(&["cca", "restore", ""])[0], STAMP);
}

#[test]
fn the_man_page_documents_the_commands() {
    let env = TestEnv::new();
    let run = env.run(&["man"]);
    run.ok();
    assert!(run.stdout.starts_with(".ie \\n(.g .ds Aq"), "roff");
    assert!(run.stdout.contains("search"));
}
