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
    // cca's own prompt for summaries is no prompt to ask with, even when overridden.
    std::fs::write(env.cca_home.join("prompts/compaction.md"), "summarise").unwrap();
    let prompts = complete(&["cca", "search", "--prompt", ""]);
    assert!(!prompts.iter().any(|p| p == "compaction"), "{prompts:?}");
    let engines = complete(&["cca", "search", "--engine", ""]);
    assert_eq!(engines, ["claude", "codex", "gemini"]);
    // Options are offered before a question, never in it: every word from its first on is
    // the question's.
    for before in [&["cca", "search", "--"][..], &["cca", "search", "-e", "gemini", "--"]] {
        assert!(complete(before).contains(&"--resume".to_string()), "{before:?}");
    }
    for within in [
        &["cca", "search", "what", "--"][..],
        &["cca", "search", "-e", "gemini", "-m", "x", "and", "on", "-"],
        &["cca", "search", "-qe", "gemini", "why", "--"],
        &["cca", "search", "--model=x", "why", "-"],
        &["cca", "steer", "wait", "--"],
        &["cca", ",", "what", "-"],
    ] {
        assert_eq!(complete(within), Vec::<String>::new(), "{within:?}");
    }
    // fish and PowerShell name no word: the cursor is on the last.
    let fish = |words: &[&str]| {
        let run =
            env.run_with(&[&["--", "cca"][..], words].concat(), None, &[("CCA_COMPLETE", "fish")]);
        run.ok().stdout.clone()
    };
    assert!(fish(&["search", "-"]).contains("--resume"));
    assert_eq!(fish(&["search", "what", "-"]), "");
    assert_eq!(fish(&[",", "and", "-"]), "");
    // `cca restore` is offered the sessions in the trash.
    env.run(&["rm", STAMP]).ok();
    assert_eq!(complete(&["cca", "restore", ""])[0], STAMP);
}

#[test]
fn the_man_page_documents_every_command_flag_key_variable_and_exit_status() {
    use clap::CommandFactory;
    let env = TestEnv::new();
    let run = env.run(&["man"]);
    run.ok();
    let page = &run.stdout;
    assert!(page.starts_with(".TH CCA 1 "), "roff: {page:.80}");
    // One page: no reference to sub-pages that are never installed.
    assert!(!page.contains("cca-search(1)"), "{page}");
    // roff escapes `-` as `\-`.
    let roff = |s: &str| s.replace('-', "\\-");
    for sub in cca::cli::Cli::command().get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        assert!(page.contains(&format!(".SS \"cca {name}")), "the man page lacks `cca {name}`");
        // A hidden flag is cca's own (what a hook runs in the background), not the user's.
        for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
            if let Some(long) = arg.get_long() {
                let flag = roff(&format!("--{long}"));
                assert!(page.contains(&flag), "the man page lacks `cca {name} --{long}`");
            }
        }
    }
    for section in [".SH CONFIGURATION", ".SH ENVIRONMENT", ".SH EXIT STATUS", ".SH FILES"] {
        assert!(page.contains(section), "the man page lacks {section}");
    }
    for var in cca::vars::ALL.iter().chain(&["CCA_COMPLETE"]) {
        assert!(page.contains(&roff(var)), "the man page lacks {var}");
    }
    for key in cca::config::FILE_KEYS
        .iter()
        .chain(cca::config::ENGINE_KEYS)
        .chain(cca::config::COMPACTION_KEYS)
    {
        assert!(page.contains(&format!("\\fB{} =", roff(key))), "the man page lacks the key {key}");
    }
    for code in ["0", "1", "2", "75", "130, 143, 129, 131, 148"] {
        assert!(page.contains(&format!(".TP\n{code}\n")), "the man page lacks exit status {code}");
    }
    for file in ["config.toml", "sessions/latest", "trash/", "locks/", "index.json", "chat_history"]
    {
        assert!(page.contains(&roff(file)), "the man page lacks the file {file}");
    }
}

/// `man` itself reads the page without a warning: no roff request is mistaken, nothing is lost.
#[test]
fn the_man_page_reads_cleanly_with_groff() {
    let env = TestEnv::new();
    let run = env.run(&["man"]);
    run.ok();
    let page = env.home.join("cca.1");
    std::fs::write(&page, &run.stdout).unwrap();
    let groff = std::process::Command::new("groff")
        .args(["-man", "-Tutf8", "-ww", "-z"])
        .arg(&page)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("groff, the man page formatter");
    let out = wait_with_timeout(groff, std::time::Duration::from_secs(30));
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
