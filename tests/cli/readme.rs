//! The README is a manual, and every command in it must work: each `cca` command line in its
//! shell examples parses with the real CLI, and what it shows of the engines is what cca runs.
//! docs/REFERENCE.md (also the man page's source) documents every setting.

use clap::Parser;

use crate::common::*;

fn read(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).unwrap()
}

fn readme() -> String {
    read("README.md")
}

/// Shell words of a line: quotes group, `#` outside quotes starts a comment.
fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '#') if !any => break,
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (Some(q), c) if c == q => quote = None,
            (None, ' ' | '\t') => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            (_, c) => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// Every `cca ...` invocation on a line: at its start, after a pipe, or inside `$(...)`.
fn invocations(line: &str) -> Vec<String> {
    let mut found = Vec::new();
    let line = line.trim();
    if let Some(rest) = line.strip_prefix(", ") {
        found.push(format!("cca , {rest}"));
    }
    for (i, _) in line.match_indices("cca ") {
        let before = line[..i].trim_end();
        let starts_command =
            i == 0 || before.ends_with('|') || before.ends_with("$(") || before.ends_with("&&");
        if !starts_command {
            continue;
        }
        let mut text = &line[i..];
        if before.ends_with("$(") {
            text = &text[..text.find(')').unwrap_or(text.len())];
        }
        for stop in [" | ", " && ", " > ", "; "] {
            if let Some(at) = text.find(stop) {
                text = &text[..at];
            }
        }
        found.push(text.to_string());
    }
    found
}

#[test]
fn every_cca_command_in_the_readme_parses() {
    let text = readme();
    let mut checked = 0;
    let mut in_shell = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_shell = line.trim() == "```sh";
            continue;
        }
        if !in_shell {
            continue;
        }
        for invocation in invocations(line) {
            let args = words(&invocation);
            if let Err(e) = cca::cli::Cli::try_parse_from(&args) {
                panic!("README: `{invocation}` does not parse:\n{e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "only {checked} commands found in the README's examples");
}

#[test]
fn the_readme_names_every_command_and_stays_short() {
    use clap::CommandFactory;
    let text = readme();
    for sub in cca::cli::Cli::command().get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        assert!(text.contains(&format!("cca {name}")), "README lacks `cca {name}`");
    }
    let lines = text.lines().count();
    assert!(
        lines < 500,
        "the README has {lines} lines: reference material goes to docs/REFERENCE.md"
    );
    // A newcomer's path comes first: install, an engine, then the quick start; editors after
    // engines and configuration; the test suite with the contributors.
    let at = |heading: &str| text.find(heading).unwrap_or_else(|| panic!("README lacks {heading}"));
    assert!(at("## Install") < at("## Set up an engine"));
    assert!(at("## Set up an engine") < at("## Quick start"));
    assert!(at("## Engines") < at("## Editors") && at("## Configuration") < at("## Editors"));
    assert!(at("make test") > at("## Development"), "`make test` is for contributors");
}

#[test]
fn the_reference_documents_every_setting_variable_and_exit_code() {
    let text = read("docs/REFERENCE.md");
    for var in cca::vars::ALL.iter().chain(&["CCA_COMPLETE"]) {
        assert!(text.contains(&format!("`{var}`")), "docs/REFERENCE.md lacks {var}");
    }
    for key in cca::config::FILE_KEYS
        .iter()
        .chain(cca::config::ENGINE_KEYS)
        .chain(cca::config::COMPACTION_KEYS)
    {
        assert!(text.contains(&format!("| `{key} =")), "docs/REFERENCE.md lacks the key {key}");
    }
    for code in ["| 0 |", "| 1 |", "| 2 |", "| 75 |", "| 130, 143, 129, 131, 148 |"] {
        assert!(text.contains(code), "docs/REFERENCE.md lacks exit code {code}");
    }
}

/// The engine command lines the README shows are the ones cca runs.
#[test]
fn the_readme_shows_the_engine_command_lines_cca_runs() {
    let text = readme();
    let env = TestEnv::new();
    // The program's name as a person types it, then its arguments.
    let command_line = |env: &TestEnv| {
        let call = env.last_call();
        let argv = argv_of(&call);
        let program = std::path::Path::new(argv[0]).file_name().unwrap().to_string_lossy();
        std::iter::once(program.to_string())
            .chain(argv[1..].iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    env.run(&["search", "q"]).ok();
    let claude = command_line(&env);
    assert!(text.contains(&format!("`{claude}`")), "README does not show `{claude}`");
    env.run(&["search", "-e", "gemini", "q"]).ok();
    let gemini = command_line(&env);
    let policy = gemini.find("--policy ").expect("a policy") + "--policy ".len();
    let shown = format!("`{}POLICY`", &gemini[..policy]);
    assert!(text.contains(&shown), "README does not show {shown}");
}

#[test]
fn config_help_lists_every_key_and_variable() {
    use clap::CommandFactory;
    let mut cmd = cca::cli::Cli::command();
    let help = cmd.find_subcommand_mut("config").unwrap().render_long_help().to_string();
    for var in cca::vars::ALL {
        assert!(help.contains(var), "cca config --help lacks {var}");
    }
    for key in cca::config::FILE_KEYS
        .iter()
        .chain(cca::config::ENGINE_KEYS)
        .chain(cca::config::COMPACTION_KEYS)
    {
        assert!(help.contains(key), "cca config --help lacks {key}");
    }
}
