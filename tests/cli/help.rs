//! `--help` teaches, and its drift is visible: a snapshot of every command's help. Also
//! snapshots of a rendered transcript and of error messages, with times and paths filtered.

use crate::common::*;

#[test]
fn help_for_every_command() {
    use clap::CommandFactory;
    let env = TestEnv::new();
    let mut commands = vec![String::new()];
    // Hidden commands are cca's own (`__engine`), not the user's.
    commands.extend(
        cca::cli::Cli::command()
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_string()),
    );
    for command in &commands {
        let mut args: Vec<&str> = command.split_whitespace().collect();
        args.push("--help");
        let run = env.run(&args);
        run.ok();
        let name = if command.is_empty() { "cca".to_string() } else { format!("cca {command}") };
        insta::assert_snapshot!(name.replace([' ', ','], "_"), run.stdout);
    }
}

#[test]
fn every_flag_has_help() {
    use clap::CommandFactory;
    fn walk(cmd: &clap::Command, path: &str) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            assert!(arg.get_help().is_some(), "{path} {id} has no help");
        }
        for sub in cmd.get_subcommands() {
            assert!(sub.get_about().is_some(), "{path} {} has no help", sub.get_name());
            walk(sub, &format!("{path} {}", sub.get_name()));
        }
    }
    walk(&cca::cli::Cli::command(), "cca");
}

#[test]
fn search_help_ends_with_examples() {
    let env = TestEnv::new();
    let run = env.run(&["search", "--help"]);
    let examples = run.stdout.split("Examples:").nth(1).expect("examples");
    assert!(examples.contains("git diff | cca search"));
}

/// Paths and durations vary from run to run; the fixed clock takes care of the rest.
fn filtered(text: &str, env: &TestEnv) -> String {
    let text = text.replace(env.root.path().to_str().unwrap(), "[TMP]");
    let text = replace_after(&text, "\"duration_ms\":", |c| c.is_ascii_digit(), "[MS]");
    replace_after(&text, "claude · ", |c| c.is_ascii_digit() || c == '.', "[S]")
}

/// Replaces the run of characters matching `keep` right after each `marker`.
fn replace_after(text: &str, marker: &str, keep: impl Fn(char) -> bool, with: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find(marker) {
        out.push_str(&rest[..at + marker.len()]);
        rest = &rest[at + marker.len()..];
        let end = rest.find(|c: char| !keep(c)).unwrap_or(rest.len());
        if end > 0 {
            out.push_str(with);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn a_rendered_transcript() {
    let env = TestEnv::new();
    env.run_with(&["search", "-q", "what changed in rust 1.89 file locking?"], None, &[]).ok();
    env.run_with(
        &["search", "-q", "-r", "and on windows?"],
        Some(b"context\n"),
        &[(
            "FAKE_SCRIPT",
            "tool WebSearch file locking windows;say It works the same.\\n```rust\\nfile.lock()?;",
        )],
    )
    .ok();
    env.run_with(&["search", "-q", "-r", "one more"], None, &[("FAKE_SCRIPT", "say half;exit 1")])
        .code(1);
    insta::assert_snapshot!("transcript", filtered(&env.latest(), &env));
    insta::assert_snapshot!("show", filtered(&env.run(&["show"]).stdout, &env));
}

#[test]
fn error_messages() {
    let env = TestEnv::new();
    let mut all = String::new();
    for (args, vars) in [
        (vec!["search", "--resume", "q"], vec![]),
        (vec!["search", "-s", "../x", "q"], vec![]),
        (vec!["search", "--prompt", "nope", "q"], vec![]),
        (vec!["search", "-e", "nope", "q"], vec![]),
        (vec!["search", "q"], vec![("CCA_HOME", "relative")]),
        (vec!["search", "q"], vec![("FAKE_SCRIPT", "err Error: 401 invalid x-api-key;exit 1")]),
        (vec!["search", "q"], vec![("FAKE_SCRIPT", "exit 0")]),
    ] {
        let run = env.run_with(&args, None, &vars);
        all.push_str(&format!("$ cca {}\n[exit {:?}]\n{}\n", args.join(" "), run.code, run.stderr));
    }
    env.write_config("engine = \"claude\"\nmodel = [\n");
    let run = env.run(&["search", "q"]);
    all.push_str(&format!("$ cca search q  (bad config)\n[exit {:?}]\n{}\n", run.code, run.stderr));
    insta::assert_snapshot!("errors", filtered(&all, &env));
}

#[test]
fn config_shows_every_setting_with_its_source() {
    let env = TestEnv::new();
    env.write_config(
        "[compaction]\nkeep_recent = 2\n\n[engines.claude]\nretries = 1\ncontext_budget = 5000\n\
         [engines.claude.model_budgets]\nbig = 9000\n\n[engines.echo]\ncommand = [\"echo-engine\", \"-x\"]\n",
    );
    let out = env.run(&["config"]).ok().stdout.clone();
    let row = |key: &str| -> String {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(key))
            .unwrap_or_else(|| panic!("no row for {key}:\n{out}"))
            .to_string()
    };
    assert!(row("compaction.keep_recent").contains("[config file]"), "{out}");
    assert!(
        row("compaction.threshold").contains("0.75")
            && row("compaction.threshold").contains("[default]")
    );
    assert!(row("compaction.enabled").contains("true"));
    assert!(row("compaction.warn_tokens").contains("30000"));
    assert!(row("sync").contains("by hand") && row("sync").contains("[default]"), "{out}");
    assert!(
        row("engines.claude.retries").contains('1')
            && row("engines.claude.retries").contains("[config file]")
    );
    assert!(row("engines.claude.context_budget").contains("5000"));
    assert!(row("engines.claude.model_budgets.big").contains("9000"));
    assert!(
        row("engines.gemini.context_budget").contains("800000")
            && row("engines.gemini.context_budget").contains("[default]")
    );
    assert!(row("engines.gemini.policy").contains("cca's own"));
    assert!(row("engines.claude.kind").contains("[built in]"));
    let kind = row("engines.echo.kind");
    assert!(
        kind.contains("command") && kind.contains("[config file]") && !kind.contains("built in"),
        "{kind}"
    );
    env.write_config("sync = \"after-turn\"\n");
    let out = env.run(&["config"]).ok().stdout.clone();
    let sync = out.lines().find(|l| l.starts_with("sync ")).unwrap_or_default();
    assert!(sync.contains("after-turn") && sync.contains("[config file]"), "{out}");
}
